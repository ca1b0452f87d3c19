package consolecmd

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
)

// SPEC K19 on the demo: two payments whose provider answer was lost, one
// after the charge and one before. Support asks the provider through the
// console; the demo's application worker runs the shop's verifier; the
// console applies each answer in support's name: the charged one
// completes with its charge as reference, the other is released, and its
// retry charges exactly once. Each decision's audit entry carries the
// verifier's evidence.
func TestVerifyWithTheProvider(t *testing.T) {
	t.Parallel()
	for _, d := range consoletest.DemoDatabases {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			dbURL := d.URL(t)
			base := consoletest.StartDemo(t, run, dbURL)
			order := consoletest.Call(t, "POST", base+"/shop/orders", `"verify-order-0000001"`, `{"sku":"lamp","qty":1}`)
			require.Equal(t, http.StatusCreated, order.Status, order.Body)
			body := fmt.Sprintf(`{"order_id":%q,"amount_cents":1999}`, order.JSON["id"])
			const charged, uncharged = `"verify-pay-charged-01"`, `"verify-pay-nocharge-1"`
			r := consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", charged, body)
			require.Equal(t, http.StatusAccepted, r.Status, r.Body)
			r = consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_before_effect", uncharged, body)
			require.Equal(t, http.StatusAccepted, r.Status, r.Body)
			charges := len(consoletest.ProviderCharges(t, base))

			db, err := openDatabase(t.Context(), dbURL)
			require.NoError(t, err)
			defer db.Close()
			record := func(raw string) (idemdriver.Record, bool) {
				page, err := db.Records.ListKeys(t.Context(), idemdriver.KeyFilter{KeyHash: idem.KeyHash(strings.Trim(raw, `"`))})
				require.NoError(t, err)
				if len(page.Records) == 0 {
					return idemdriver.Record{}, false
				}
				return page.Records[0], true
			}

			support := consoletest.SignIn(t, base, "support", demoPassword("support"))
			verify := func(raw string) int64 {
				rec, ok := record(raw)
				require.True(t, ok)
				require.Equal(t, idemdriver.StatusPending, rec.Status)
				path := "/keys/" + strconv.FormatInt(rec.ID, 10)
				_, page := support.Do(t, http.MethodGet, path, nil, "")
				require.Less(t, strings.Index(page, `action="`+path+`/verify"`), strings.Index(page, `action="`+path+`/confirm"`), "verify is offered first")
				version, key := consoletest.DecisionForm(t, page, path+"/verify")
				resp, body := support.Do(t, http.MethodPost, path+"/verify", url.Values{"version": {version}, "form_key": {key},
					"reason": {"the customer says the payment is stuck"}}, "")
				require.Equal(t, http.StatusSeeOther, resp.StatusCode, consoletest.PageText(body))
				require.Equal(t, path+"?done=verify", resp.Header.Get("Location"))
				return rec.ID
			}
			chargedID, unchargedID := verify(charged), verify(uncharged)

			deadline := time.Now().Add(time.Minute)
			for {
				c, stillThere := record(charged)
				_, unchargedThere := record(uncharged)
				if c.Status == idemdriver.StatusCompleted && stillThere && !unchargedThere {
					require.Regexp(t, `^ch_\d+$`, c.ExternalRef, "completed with the provider's charge")
					break
				}
				require.True(t, time.Now().Before(deadline), "the answers were not applied: charged %s, uncharged still there %v", c.Status, unchargedThere)
				time.Sleep(100 * time.Millisecond)
			}
			require.Len(t, consoletest.ProviderCharges(t, base), charges, "verifying charges nothing")
			r = consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", charged, body)
			consoletest.RequireProblem(t, r, http.StatusConflict, "idempotent_response_unavailable")
			r = consoletest.Call(t, "POST", base+"/shop/payments", uncharged, body)
			require.Equal(t, http.StatusCreated, r.Status, "the released payment runs once: %s", r.Body)
			require.Len(t, consoletest.ProviderCharges(t, base), charges+1, "and charges once")

			keys, err := demoAuditKeys(func(string) string { return "" }, demoSecret, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			db.useAuditKeys(keys)
			for id, action := range map[int64]string{chargedID: "key.confirm_happened", unchargedID: "key.confirm_not_happened"} {
				hist, err := db.Trail.History(t.Context(), "key", strconv.FormatInt(id, 10), 10)
				require.NoError(t, err)
				var applied []audit.Entry
				for _, e := range hist {
					if e.Outcome == audit.OutcomeApplied {
						applied = append(applied, e)
					}
				}
				require.Len(t, applied, 1, "one decision for key %d", id)
				e := applied[0]
				require.Equal(t, action, e.Action)
				require.Equal(t, "support", e.Actor, "in the name of the operator who asked")
				require.Contains(t, e.Reason, "via verifier demo payment provider")
				var after struct {
					Verification struct {
						Verdict, Evidence, Verifier string
					} `json:"verification"`
				}
				require.NoError(t, json.Unmarshal(e.After, &after))
				require.Equal(t, "demo payment provider", after.Verification.Verifier)
				require.NotEmpty(t, after.Verification.Evidence, "the evidence is in the entry")
			}
			_, page := support.Do(t, http.MethodGet, "/keys/"+strconv.FormatInt(unchargedID, 10), nil, "")
			require.Contains(t, page, "Confirmed it did not happen", "the released key's page says so")
		})
	}
}

// SPEC K19, the 3 a.m. path through the console's bulk flow: payments time
// out after the charge and before it; on-call asks the provider about all
// pending payments in one request; every charged one completes with its
// charge, every other is released and its retry charges exactly once;
// none is forgotten.
func TestVerifyAllFromABulkRequest(t *testing.T) {
	t.Parallel()
	for _, d := range consoletest.DemoDatabases {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			dbURL := d.URL(t)
			base, _ := consoletest.StartDemoWith(t, run, dbURL, "--approval-required", "none")
			order := consoletest.Call(t, "POST", base+"/shop/orders", `"verify-bulk-order-001"`, `{"sku":"lamp","qty":1}`)
			require.Equal(t, http.StatusCreated, order.Status, order.Body)
			body := fmt.Sprintf(`{"order_id":%q,"amount_cents":2500}`, order.JSON["id"])
			charged := []string{`"verify-bulk-charged-01"`, `"verify-bulk-charged-02"`}
			uncharged := []string{`"verify-bulk-nocharge-1"`, `"verify-bulk-nocharge-2"`}
			for _, k := range charged {
				require.Equal(t, http.StatusAccepted, consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", k, body).Status)
			}
			for _, k := range uncharged {
				require.Equal(t, http.StatusAccepted, consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_before_effect", k, body).Status)
			}
			charges := len(consoletest.ProviderCharges(t, base))

			oncall := consoletest.SignIn(t, base, "oncall", demoPassword("oncall"))
			filter := url.Values{"action": {"verify"}, "state": {"pending"}, "operation": {"POST /shop/payments"}}
			report, page := oncall.Freeze(t, "/keys/bulk?"+filter.Encode())
			require.Contains(t, page, "<strong>4</strong> matching items can be decided")
			form := consoletest.HiddenFields(t, page, report+"/submit")
			form.Set("reason", "payments timed out at the provider: ask it about each")
			form.Set("confirm_count", "4")
			resp, page := oncall.Do(t, http.MethodPost, report+"/submit", form, "")
			require.Equal(t, http.StatusSeeOther, resp.StatusCode, consoletest.PageText(page))

			db, err := openDatabase(t.Context(), dbURL)
			require.NoError(t, err)
			defer db.Close()
			statusOf := func(raw string) (idemdriver.Status, string, bool) {
				page, err := db.Records.ListKeys(t.Context(), idemdriver.KeyFilter{KeyHash: idem.KeyHash(strings.Trim(raw, `"`))})
				require.NoError(t, err)
				if len(page.Records) == 0 {
					return "", "", false
				}
				return page.Records[0].Status, page.Records[0].ExternalRef, true
			}
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
				settled := true
				for _, k := range charged {
					st, _, _ := statusOf(k)
					settled = settled && st == idemdriver.StatusCompleted
				}
				for _, k := range uncharged {
					_, _, there := statusOf(k)
					settled = settled && !there
				}
				if settled {
					break
				}
				require.True(t, time.Now().Before(deadline), "the answers were not all applied")
			}
			for _, k := range charged {
				_, ref, _ := statusOf(k)
				require.Regexp(t, `^ch_\d+$`, ref, "completed with its own charge")
				consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", k, body), http.StatusConflict, "idempotent_response_unavailable")
			}
			require.Len(t, consoletest.ProviderCharges(t, base), charges, "asking charges nothing")
			// The request's report lists each answer with its evidence.
			_, page = oncall.Do(t, http.MethodGet, report, nil, "")
			require.Contains(t, page, "Answers of the applications' verifiers")
			require.Equal(t, 2, strings.Count(page, "completed with ch_"), consoletest.PageText(page))
			require.Equal(t, 2, strings.Count(page, "released: the client"), consoletest.PageText(page))
			require.Equal(t, 2, strings.Count(page, "— charge ch_"), "the evidence of the charged ones")
			require.Equal(t, 2, strings.Count(page, "— the provider has no charge under this key"), "and of the others")
			for _, k := range uncharged {
				r := consoletest.Call(t, "POST", base+"/shop/payments", k, body)
				require.Equal(t, http.StatusCreated, r.Status, r.Body)
			}
			require.Len(t, consoletest.ProviderCharges(t, base), charges+len(uncharged), "each released payment charged once on its retry")
		})
	}
}

// SPEC K19: with --verify-pending-after the console asks the provider on
// its own about keys unknown for that long; the answer is applied as
// "reconciliation".
func TestScheduledVerificationOnTheDemo(t *testing.T) {
	t.Parallel()
	dbURL := "sqlite:" + filepath.Join(t.TempDir(), "demo.db")
	base, _ := consoletest.StartDemoWith(t, run, dbURL, "--verify-pending-after", "1s", "--verify-every", "1s")
	order := consoletest.Call(t, "POST", base+"/shop/orders", `"verify-sched-order-01"`, `{"sku":"lamp","qty":1}`)
	require.Equal(t, http.StatusCreated, order.Status, order.Body)
	body := fmt.Sprintf(`{"order_id":%q,"amount_cents":900}`, order.JSON["id"])
	const key = `"verify-sched-charged-1"`
	require.Equal(t, http.StatusAccepted, consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", key, body).Status)
	db, err := openDatabase(t.Context(), dbURL)
	require.NoError(t, err)
	defer db.Close()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		page, err := db.Records.ListKeys(t.Context(), idemdriver.KeyFilter{KeyHash: idem.KeyHash(strings.Trim(key, `"`))})
		require.NoError(t, err)
		require.Len(t, page.Records, 1)
		if r := page.Records[0]; r.Status == idemdriver.StatusCompleted {
			require.Regexp(t, `^ch_\d+$`, r.ExternalRef)
			keys, err := demoAuditKeys(func(string) string { return "" }, demoSecret, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			db.useAuditKeys(keys)
			hist, err := db.Trail.History(t.Context(), "key", strconv.FormatInt(r.ID, 10), 50)
			require.NoError(t, err)
			// The decision; a later run may have asked again before the
			// answer came (it joined the waiting job).
			var applied []audit.Entry
			for _, e := range hist {
				if e.Outcome == audit.OutcomeApplied {
					applied = append(applied, e)
				}
			}
			require.Len(t, applied, 1, "decided once")
			require.Equal(t, "reconciliation", applied[0].Actor)
			require.Equal(t, "key.confirm_happened", applied[0].Action)
			break
		}
		require.True(t, time.Now().Before(deadline), "the scheduled verification did not settle the key")
	}
}
