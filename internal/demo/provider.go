package demo

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/unstuckhq/unstuck/idem"
)

// Failure modes of the fake payment provider, chosen per request with
// ?fail= on POST /shop/payments.
const (
	FailTimeoutBeforeEffect = "timeout_before_effect" // no charge is made; the answer never comes
	FailTimeoutAfterEffect  = "timeout_after_effect"  // the charge is made; the answer is lost
	FailError500            = "error_500"             // the provider fails before any effect
	FailPermanent           = "permanent"             // the provider declines (a 4xx): no charge
)

var failModes = map[string]bool{"": true, FailTimeoutBeforeEffect: true, FailTimeoutAfterEffect: true, FailError500: true, FailPermanent: true}

// Charge is what the provider really holds.
type Charge struct {
	ID             string    `json:"id"`
	IdempotencyKey string    `json:"idempotency_key"`
	OrderID        string    `json:"order_id"`
	AmountCents    int64     `json:"amount_cents"`
	CreatedAt      time.Time `json:"created_at"`
}

// ProviderState is the provider's whole state, for GET /shop/provider/state.
type ProviderState struct {
	Charges []Charge `json:"charges"`
	Calls   int      `json:"calls"`
	// Workspaces are the workspace provider's, when signups run.
	Workspaces []Workspace `json:"workspaces"`
}

// Provider is an in-process fake of an external payment provider. Like a
// real one it deduplicates charges by the idempotency key it is given, so a
// retry after a lost answer does not charge twice. It is the one fake in
// the project: the provider it stands for does not exist.
type Provider struct {
	mu      sync.Mutex
	charges map[string]Charge // by idempotency key
	calls   int
	now     func() time.Time
}

// NewProvider returns an empty provider.
func NewProvider() *Provider {
	return &Provider{charges: map[string]Charge{}, now: time.Now}
}

// ProviderError is a provider answer that is not a charge.
type ProviderError struct {
	Status  int // 0 for a timeout: the outcome is unknown
	Message string
}

func (e *ProviderError) Error() string { return e.Message }

// Timeout reports whether the call timed out, leaving the outcome unknown.
func (e *ProviderError) Timeout() bool { return e.Status == 0 }

// Charge charges amount for order under key, failing as fail says. The
// reference the caller sent ("ref") is known even when the answer is lost.
func (p *Provider) Charge(key, orderID string, amount int64, fail string) (Charge, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	switch fail {
	case FailTimeoutBeforeEffect:
		return Charge{}, &ProviderError{Message: "provider timed out"}
	case FailError500:
		return Charge{}, &ProviderError{Status: 500, Message: "provider internal error"}
	case FailPermanent:
		return Charge{}, &ProviderError{Status: 402, Message: "card declined"}
	}
	c, ok := p.charges[key]
	if !ok {
		c = Charge{ID: fmt.Sprintf("ch_%06d", len(p.charges)+1), IdempotencyKey: key, OrderID: orderID, AmountCents: amount, CreatedAt: p.now().UTC()}
		p.charges[key] = c
	}
	if fail == FailTimeoutAfterEffect {
		return Charge{}, &ProviderError{Message: "provider timed out after charging " + c.ID}
	}
	return c, nil
}

// Lookup returns the charge made under key, if any: what a reconciler asks.
func (p *Provider) Lookup(key string) (Charge, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.charges[key]
	return c, ok
}

// State returns a copy of the provider's state, charges in creation order.
func (p *Provider) State() ProviderState {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := ProviderState{Charges: make([]Charge, 0, len(p.charges)), Calls: p.calls}
	for _, c := range p.charges {
		st.Charges = append(st.Charges, c)
	}
	sort.Slice(st.Charges, func(i, j int) bool { return st.Charges[i].ID < st.Charges[j].ID })
	return st
}

// PaymentOperation is the operation of the shop's payment records.
const PaymentOperation = "POST /shop/payments"

// PaymentVerifier is the shop's verifier of payments (SPEC K19): it asks
// the provider for the charge made under the key's provider reference
// (the payment handler derives it from the key's digest), and answers
// happened with the charge, or did not happen.
func (p *Provider) PaymentVerifier() idem.Verifier {
	return idem.VerifierFunc(func(ctx context.Context, a idem.Abandoned) (idem.Verification, error) {
		if len(a.KeyDigest) < 32 {
			return idem.Verification{}, fmt.Errorf("demo: a key digest of %d characters", len(a.KeyDigest))
		}
		c, ok := p.Lookup(PaymentProviderKey(a.KeyDigest))
		if !ok {
			return idem.Verification{Verdict: idem.VerdictNotHappened, Evidence: "the provider has no charge under this key"}, nil
		}
		return idem.Verification{Verdict: idem.VerdictHappened, ExternalRef: c.ID,
			Evidence: fmt.Sprintf("charge %s of %d cents for order %s at %s", c.ID, c.AmountCents, c.OrderID, c.CreatedAt.Format(time.RFC3339))}, nil
	})
}

// PaymentProviderKey is the idempotency key the shop sends the provider
// for a payment whose record has keyDigest: stable across retries and
// takeovers.
func PaymentProviderKey(keyDigest string) string { return "shop-pay-" + keyDigest[:32] }
