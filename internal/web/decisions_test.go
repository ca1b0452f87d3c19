package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
)

// pendingKey makes a pending record (a provider timed out) and returns its
// console ID and version.
func pendingKey(t *testing.T, b *bundle, key string) (int64, int64) {
	t.Helper()
	_, err := idem.Run(context.Background(), b.engine, key, "tenant:web", func(ctx context.Context) (int, error) {
		require.NoError(t, idem.Annotate(ctx, idem.Annotation{ExternalRef: "prov-" + key}))
		return 0, idem.Uncertain(errors.New("timeout"))
	}, nil)
	require.ErrorIs(t, err, idem.ErrUncertain)
	page, err := b.records.ListKeys(context.Background(), idemdriver.KeyFilter{Scope: "tenant:web", Operation: idem.DefaultOperation,
		KeyDigest: idem.Digest("tenant:web", idem.DefaultOperation, key)})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	return page.Records[0].ID, page.Records[0].Version
}

// formKeyOf finds the form key the detail page minted for action.
func formKeyOf(t *testing.T, body, action string) string {
	t.Helper()
	m := regexp.MustCompile(`action="` + regexp.QuoteMeta(action) + `">[\s\S]*?name="form_key" value="([^"]+)"`).FindStringSubmatch(body)
	require.Len(t, m, 2, "the page offers %s", action)
	return m[1]
}

func TestKeyDecisions(t *testing.T) {
	t.Parallel()

	t.Run("SupportForgetsAPendingKeyOnceEvenIfSubmittedTwice", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id, version := pendingKey(t, b, "web-forget")
		support := signIn(t, b, store.RoleSupport)
		path := "/keys/" + strconv.FormatInt(id, 10)
		_, page := do(t, support, http.MethodGet, b.srv.URL+path, nil)
		require.Contains(t, page, "Forget — key "+strconv.FormatInt(id, 10))
		require.Contains(t, page, "The next request with this key runs again", "the consequence is stated")
		// SPEC K20: the key carries a reference and an unknown outcome, so
		// the page leads with the confirmation, and forget asks for an
		// acknowledgement; without it the POST is refused, not applied.
		require.Less(t, strings.Index(page, `action="`+path+`/confirm"`), strings.Index(page, `action="`+path+`/forget"`), "confirm first")
		require.Contains(t, page, `name="acknowledge_rerun"`)
		require.Contains(t, page, "runs the operation (run) again")
		resp, body := do(t, support, http.MethodPost, b.srv.URL+path+"/forget", url.Values{"version": {strconv.FormatInt(version, 10)},
			"reason": {"the provider has no such charge"}, "form_key": {"form-key-without-acknowledgement"}})
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
		require.Contains(t, body, `data-field="acknowledge_rerun"`)
		_, ok, err := b.records.KeyByID(context.Background(), id)
		require.NoError(t, err)
		require.True(t, ok, "not forgotten without the acknowledgement")

		form := url.Values{"acknowledge_rerun": {"yes"}, "version": {strconv.FormatInt(version, 10)}, "reason": {"the provider has no such charge"},
			"form_key": {formKeyOf(t, page, path+"/forget")}}
		first, _ := do(t, support, http.MethodPost, b.srv.URL+path+"/forget", form)
		require.Equal(t, http.StatusSeeOther, first.StatusCode)
		require.Equal(t, path+"?done=removed", first.Header.Get("Location"), "to the removed key's page")
		again, _ := do(t, support, http.MethodPost, b.srv.URL+path+"/forget", form)
		require.Equal(t, http.StatusSeeOther, again.StatusCode, "the double submit gets the same answer")
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"), "replayed, not applied again")

		_, ok, err = b.records.KeyByID(context.Background(), id)
		require.NoError(t, err)
		require.False(t, ok, "released")
		refused, _, err := b.trail.List(context.Background(), audit.Filter{TargetKind: "key", TargetID: strconv.FormatInt(id, 10), Outcome: audit.OutcomeConflict})
		require.NoError(t, err)
		require.Len(t, refused, 1, "the refused attempt is audited")
		entries, _, err := b.trail.List(context.Background(), audit.Filter{TargetKind: "key", TargetID: strconv.FormatInt(id, 10), Outcome: audit.OutcomeApplied})
		require.NoError(t, err)
		require.Len(t, entries, 1, "one decision, one audit entry")
		require.Contains(t, string(entries[0].After), "runs the operation (run) again", "the acknowledgement is in the entry")
		require.Equal(t, "key.forget", entries[0].Action)
		require.Equal(t, "support", entries[0].Actor)
		require.Equal(t, audit.OutcomeApplied, entries[0].Outcome)
		require.Equal(t, "the provider has no such charge", entries[0].Reason)
		require.NotEmpty(t, entries[0].RequestID)

		// The next request with the key runs again.
		res, err := idem.Run(context.Background(), b.engine, "web-forget", "tenant:web", func(context.Context) (int, error) { return 5, nil }, nil)
		require.NoError(t, err)
		require.False(t, res.Replayed)
	})

	t.Run("OncallConfirmsHappened", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id, version := pendingKey(t, b, "web-confirm")
		oncall := signIn(t, b, store.RoleOncall)
		path := "/keys/" + strconv.FormatInt(id, 10)
		_, page := do(t, oncall, http.MethodGet, b.srv.URL+path, nil)
		form := url.Values{"version": {strconv.FormatInt(version, 10)}, "reason": {"provider dashboard shows ch_77"},
			"outcome": {"happened"}, "external_ref": {"ch_77"}, "form_key": {formKeyOf(t, page, path+"/confirm")}}
		resp, _ := do(t, oncall, http.MethodPost, b.srv.URL+path+"/confirm", form)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		_, page = do(t, oncall, http.MethodGet, b.srv.URL+resp.Header.Get("Location"), nil)
		require.Contains(t, page, "Confirmed it happened")
		require.Contains(t, page, "key.confirm_happened", "the item's own audit history")
		rec, ok, err := b.records.KeyByID(context.Background(), id)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusCompleted, rec.Status)
		require.Equal(t, "ch_77", rec.ExternalRef)
		require.NotContains(t, page, `action="`+path+`/confirm"`, "a confirmed key offers no confirm any more")
	})

	t.Run("StaleAndInvalidDecisionsAreRefusedClearly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id, version := pendingKey(t, b, "web-stale")
		oncall := signIn(t, b, store.RoleOncall)
		path := "/keys/" + strconv.FormatInt(id, 10)
		_, page := do(t, oncall, http.MethodGet, b.srv.URL+path, nil)

		short := url.Values{"version": {strconv.FormatInt(version, 10)}, "reason": {"short"}, "form_key": {formKeyOf(t, page, path+"/forget")}}
		resp, body := do(t, oncall, http.MethodPost, b.srv.URL+path+"/forget", short)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.Contains(t, body, `data-field="reason"`)
		require.Contains(t, body, "at least 10 characters")

		stale := url.Values{"version": {strconv.FormatInt(version-1, 10)}, "reason": {"an old page was still open"}, "form_key": {"stale-form-key-00000001"}}
		resp, body = do(t, oncall, http.MethodPost, b.srv.URL+path+"/forget", stale)
		require.Equal(t, http.StatusConflict, resp.StatusCode)
		require.Contains(t, body, "changed since you opened the page")
		rec, ok, err := b.records.KeyByID(context.Background(), id)
		require.NoError(t, err)
		require.True(t, ok, "nothing applied")
		require.Equal(t, version, rec.Version)

		entries, _, err := b.trail.List(context.Background(), audit.Filter{TargetKind: "key", TargetID: strconv.FormatInt(id, 10)})
		require.NoError(t, err)
		require.Len(t, entries, 1, "the stale attempt is audited; the invalid one changed nothing and is not a decision")
		require.Equal(t, audit.OutcomeConflict, entries[0].Outcome)
	})

	t.Run("AuditorSeesNoControlsAndAHandMadePostIsDeniedAndAudited", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id, version := pendingKey(t, b, "web-denied")
		auditor := signIn(t, b, store.RoleAuditor)
		path := "/keys/" + strconv.FormatInt(id, 10)
		_, page := do(t, auditor, http.MethodGet, b.srv.URL+path, nil)
		require.NotContains(t, page, `action="`+path+`/forget"`)
		require.NotContains(t, page, `action="`+path+`/confirm"`)
		resp, _ := do(t, auditor, http.MethodPost, b.srv.URL+path+"/forget",
			url.Values{"version": {strconv.FormatInt(version, 10)}, "reason": {"trying what I may not do"}, "form_key": {"auditor-form-key-0001"}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		entries, _, err := b.trail.List(context.Background(), audit.Filter{Outcome: audit.OutcomeDenied})
		require.NoError(t, err)
		require.Len(t, entries, 1)
		require.Equal(t, "auditor", entries[0].Actor)
		require.Equal(t, "key", entries[0].TargetKind)
		require.Equal(t, strconv.FormatInt(id, 10), entries[0].TargetID)
		_, ok, err := b.records.KeyByID(context.Background(), id)
		require.NoError(t, err)
		require.True(t, ok, "nothing applied")
	})
}
