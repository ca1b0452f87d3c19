package views

import "strings"

// The names of the decisions: the same words on an item's page, in a bulk
// request's action, in an approval and in the API's "what". A page may
// add the target ("Forget — key 45") or a step, never other words for the
// same decision.
const (
	DecisionVerify             = "Verify with the provider"
	DecisionConfirmHappened    = "Confirm it happened"
	DecisionConfirmNotHappened = "Confirm it did not happen"
	DecisionForget             = "Forget"
	DecisionRetry              = "Retry"
	DecisionCompensate         = "Compensate"
	DecisionResolve            = "Resolve"
	DecisionRedrive            = "Redrive"
)

// Decisions are the decision names, in the order a page offers them.
var Decisions = []string{DecisionVerify, DecisionConfirmHappened, DecisionConfirmNotHappened, DecisionForget,
	DecisionRetry, DecisionCompensate, DecisionResolve, DecisionRedrive}

// KeyTarget is how a decision's title names one key: "Forget — key 45".
func KeyTarget(decision, id string) string { return decision + " — key " + id }

// lowerFirst is a decision name inside a sentence: "forget".
func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
