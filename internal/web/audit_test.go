package web_test

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// seedAudit appends three entries: an applied key decision with its
// states, a conflicting operation decision and a denied attempt.
func seedAudit(t *testing.T, b *bundle) {
	t.Helper()
	for _, e := range []audit.Entry{
		{Actor: "ada", Role: "support", Action: "key.forget", TargetKind: "key", TargetID: itoa(b.keyID),
			Reason: "customer asked to retry the order", Before: json.RawMessage(`{"status":"unavailable"}`),
			After: json.RawMessage(`{"deleted":true}`), Outcome: audit.OutcomeApplied,
			RequestID: "req-ada-1", ClientAddr: "10.0.0.1", UserAgent: "Firefox/140"},
		{Actor: "bob", Role: "oncall", Action: "operation.retry", TargetKind: "operation", TargetID: b.opID,
			Reason: "provider is back up, retrying", Outcome: audit.OutcomeConflict, RequestID: "req-bob-1"},
		{Actor: "cy", Role: "auditor", Action: "key.forget", TargetKind: "key", TargetID: "7",
			Reason: "refused: the role may not do this", Outcome: audit.OutcomeDenied, RequestID: "req-cy-1"},
	} {
		_, err := b.trail.Append(context.Background(), e)
		require.NoError(t, err)
	}
}

var seqRow = regexp.MustCompile(`<tr data-seq="(\d+)">`)

// rows returns the seqs of the audit table's rows, in page order.
func rows(body string) []string {
	var out []string
	for _, m := range seqRow.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestAuditPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedAudit(t, b)
	c := signIn(t, b, store.RoleAuditor)
	get := func(q string) (*http.Response, string) {
		t.Helper()
		return do(t, c, http.MethodGet, b.srv.URL+"/audit"+q, nil)
	}

	t.Run("list", func(t *testing.T) {
		resp, body := get("")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, `<a href="/audit" aria-current="page">Audit</a>`, "the nav marks the page")
		require.Contains(t, body, `<table class="list" aria-label="Audit trail">`)
		require.Equal(t, []string{"3", "2", "1"}, rows(body), "newest first")
		require.Contains(t, body, `<a href="/keys/`+itoa(b.keyID)+`">key `+itoa(b.keyID)+`</a>`, "a key target links to the key")
		require.Contains(t, body, `<a href="/operations/`+b.opID+`">operation`, "an operation target links to the operation")
		require.Contains(t, body, "customer asked to retry the order")
		require.Contains(t, body, `<span class="chip chip-applied">applied</span>`)
		require.Contains(t, body, `<span class="chip chip-denied">denied</span>`)
		require.Contains(t, body, "<code>req-ada-1</code>")
		require.Contains(t, body, `ada <span class="role">support</span>`)
		require.Contains(t, body, "<summary>Before and after", "states in a details element")
		require.Contains(t, body, html.EscapeString("{\n  \"status\": \"unavailable\"\n}"))
		require.Contains(t, body, "Firefox/140")
		require.Contains(t, body, `<label for="target_kind">Target kind</label>`, "every control is labelled")
		require.Contains(t, body, `href="/audit/export?format=csv"`)
		require.Contains(t, body, `href="/audit/export?format=jsonl"`)
		require.Regexp(t, `<time datetime="[^"]+" title="[^"]+Z">\d+s ago</time>`, body, "relative times with the UTC time")
		require.NotContains(t, body, "Next page")
	})

	t.Run("filters", func(t *testing.T) {
		for q, want := range map[string][]string{
			"?actor=ada":                                 {"1"},
			"?action=key.forget":                         {"3", "1"},
			"?target_kind=key":                           {"3", "1"},
			"?target_kind=key&target_id=7":               {"3"},
			"?target_kind=operation&target_id=" + b.opID: {"2"},
			"?outcome=conflict":                          {"2"},
			"?outcome=denied&action=key.forget":          {"3"},
			"?from=2000-01-01T00:00&to=2999-01-01T00:00": {"3", "2", "1"},
			"?from=2999-01-01T00:00":                     nil,
			"?to=2000-01-01T00:00:00":                    nil,
			"?actor=nobody":                              nil,
		} {
			resp, body := get(q)
			require.Equal(t, http.StatusOK, resp.StatusCode, q)
			require.Equal(t, want, rows(body), q)
			if want == nil {
				require.Contains(t, body, "No entries match", q)
			}
		}
		_, body := get("?outcome=denied&actor=cy")
		require.Contains(t, body, `<option value="denied" selected>`, "the filter stays in the form")
		require.Contains(t, body, `value="cy"`)
		require.Contains(t, body, `href="/audit/export?actor=cy&amp;format=csv&amp;outcome=denied"`, "exports carry the filters")
	})

	t.Run("bad filters", func(t *testing.T) {
		for q, field := range map[string]string{
			"?outcome=bogus":       "outcome",
			"?target_id=7":         "target_id",
			"?from=yesterday":      "from",
			"?to=2026-13-01T00:00": "to",
			"?from=2026-02-01T00:00&to=2026-01-01T00:00": "to",
			"?after=abc":                         "after",
			"?after=-4":                          "after",
			"?actor=" + strings.Repeat("a", 300): "actor",
			"?action=" + url.QueryEscape("key\x00forget"): "action",
		} {
			resp, body := get(q)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
			require.Contains(t, body, `role="alert" data-field="`+field+`"`, q)
		}
		_, body := get("?outcome=bogus")
		require.Contains(t, body, `Unknown outcome &#34;bogus&#34;`)
	})

	t.Run("pages", func(t *testing.T) {
		for i := range 60 {
			_, err := b.trail.Append(context.Background(), audit.Entry{Actor: "bulk", Role: "oncall", Action: "operation.retry",
				TargetKind: "operation", TargetID: fmt.Sprintf("op-%02d", i), Outcome: audit.OutcomeApplied})
			require.NoError(t, err)
		}
		_, body := get("?actor=bulk")
		page1 := rows(body)
		require.Len(t, page1, audit.DefaultLimit)
		require.Equal(t, "63", page1[0])
		next := regexp.MustCompile(`<a class="next" href="([^"]+)" rel="next">`).FindStringSubmatch(body)
		require.Len(t, next, 2)
		require.Equal(t, "/audit?actor=bulk&after=14", html.UnescapeString(next[1]), "the cursor is the last seq shown, with the filters")
		require.NotContains(t, body, "First page")

		// Entries appended meanwhile do not shift the next page.
		_, err := b.trail.Append(context.Background(), audit.Entry{Actor: "bulk", Action: "key.forget", TargetKind: "key", TargetID: "1", Outcome: audit.OutcomeApplied})
		require.NoError(t, err)
		_, body = get(strings.TrimPrefix(html.UnescapeString(next[1]), "/audit"))
		page2 := rows(body)
		require.Len(t, page2, 10)
		require.Equal(t, []string{"13", "4"}, []string{page2[0], page2[9]})
		require.NotContains(t, body, "Next page")
		require.Contains(t, body, `<a href="/audit?actor=bulk">First page</a>`)
		require.Contains(t, body, `href="/audit/export?actor=bulk&amp;format=csv"`, "the export is the whole filtered trail, not from the cursor")
	})

	t.Run("htmx fragment", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/audit?actor=ada", nil)
		require.NoError(t, err)
		req.Header.Set("HX-Request", "true")
		resp, err := c.Do(req)
		require.NoError(t, err)
		frag, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NotContains(t, string(frag), "<html")
		require.Contains(t, string(frag), `id="results"`)
		require.Equal(t, []string{"1"}, rows(string(frag)))
	})
}

// export downloads an export with a known user agent.
func export(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	req.Header.Set("User-Agent", "audit-test-agent/1.0")
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

// exports lists the exports the trail recorded (reads), newest first.
func exports(t *testing.T, b *bundle) []audit.Entry {
	t.Helper()
	es, _, err := b.trail.List(context.Background(), audit.Filter{Action: "audit.export", Outcome: audit.OutcomeRead})
	require.NoError(t, err)
	return es
}

func TestAuditExport(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seedAudit(t, b)
	c := signIn(t, b, store.RoleAuditor)

	t.Run("csv", func(t *testing.T) {
		resp, body := export(t, c, b.srv.URL+"/audit/export?format=csv&action=key.forget")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/csv; charset=utf-8", resp.Header.Get("Content-Type"))
		require.Regexp(t, `^attachment; filename="audit-\d{8}T\d{6}Z\.csv"$`, resp.Header.Get("Content-Disposition"))
		records, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		require.NoError(t, err)
		require.Len(t, records, 3, "a header and the two key.forget entries")
		require.Equal(t, []string{"seq", "at", "actor", "role", "action", "target_kind", "target_id", "reason"}, records[0][:8])
		require.Equal(t, []string{"3", "cy", "denied"}, []string{records[1][0], records[1][2], records[1][10]})
		require.Equal(t, []string{"1", "ada", "customer asked to retry the order", `{"status":"unavailable"}`}, []string{records[2][0], records[2][2], records[2][7], records[2][8]})

		es := exports(t, b)
		require.Len(t, es, 1, "the export is recorded")
		e := es[0]
		require.Equal(t, int64(4), e.Seq)
		require.Equal(t, []string{"auditor", "auditor", "audit", "read", `export csv action="key.forget"`, "127.0.0.1", "audit-test-agent/1.0"},
			[]string{e.Actor, e.Role, e.TargetKind, e.Outcome, e.Reason, e.ClientAddr, e.UserAgent})
		require.NotEmpty(t, e.RequestID, "the request ID of chi's middleware")
	})

	t.Run("jsonl", func(t *testing.T) {
		resp, body := export(t, c, b.srv.URL+"/audit/export?format=jsonl")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
		require.Regexp(t, `^attachment; filename="audit-\d{8}T\d{6}Z\.jsonl"$`, resp.Header.Get("Content-Disposition"))
		var got []audit.Entry
		sc := bufio.NewScanner(strings.NewReader(body))
		for sc.Scan() {
			var e audit.Entry
			require.NoError(t, json.Unmarshal(sc.Bytes(), &e))
			h, err := testAuditKeys.ComputeHash(e)
			require.NoError(t, err)
			require.Equal(t, e.Hash, h, "seq %d verifies from the export, with the audit key", e.Seq)
			got = append(got, e)
		}
		require.NoError(t, sc.Err())
		require.Len(t, got, 5, "three entries, the CSV export and this export")
		require.Equal(t, int64(5), got[0].Seq)
		require.Equal(t, "audit.export", got[0].Action, "the export was recorded before it streamed: it holds its own entry")
		require.Equal(t, "export jsonl all entries", got[0].Reason)
		require.Equal(t, audit.OutcomeRead, got[0].Outcome)
		require.Equal(t, json.RawMessage(`{"deleted":true}`), got[4].After)
	})

	t.Run("refused exports are not recorded", func(t *testing.T) {
		before := len(exports(t, b))
		for q, field := range map[string]string{
			"":                            "format",
			"?format=xml":                 "format",
			"?format=csv&outcome=bogus":   "outcome",
			"?format=jsonl&target_id=7":   "target_id",
			"?format=csv&from=not-a-time": "from",
			"?format=csv&after=not-a-seq": "after",
		} {
			req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/audit/export"+q, nil)
			require.NoError(t, err)
			req.Header.Set("Accept", "application/json")
			resp, err := c.Do(req)
			require.NoError(t, err)
			var p struct{ Code, Field string }
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
			resp.Body.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
			require.Equal(t, "invalid", p.Code, q)
			require.Equal(t, field, p.Field, q)
		}
		require.Len(t, exports(t, b), before)
	})

	t.Run("refused roles", func(t *testing.T) {
		before := len(exports(t, b))
		for _, role := range []string{store.RoleSupport, store.RoleOncall} {
			resp, body := export(t, signIn(t, b, role), b.srv.URL+"/audit/export?format=csv")
			require.Equal(t, http.StatusForbidden, resp.StatusCode, role)
			require.NotContains(t, body, "customer asked to retry the order", role)
			resp, _ = do(t, signIn(t, b, role), http.MethodGet, b.srv.URL+"/audit", nil)
			require.Equal(t, http.StatusForbidden, resp.StatusCode, role)
		}
		require.Len(t, exports(t, b), before)
		_, body := do(t, signIn(t, b, store.RoleOncall), http.MethodGet, b.srv.URL+"/", nil)
		require.NotContains(t, body, `href="/audit"`, "no nav item for roles that may not see the trail")
	})
}

// countingTrail counts the verifications of the trail it wraps.
type countingTrail struct {
	web.AuditTrail
	verifies atomic.Int64
}

func (c *countingTrail) Verify(ctx context.Context, anchors ...audit.Anchor) (audit.Verification, error) {
	c.verifies.Add(1)
	return c.AuditTrail.Verify(ctx, anchors...)
}

// tamper edits seq 2's reason behind the triggers' back.
func tamper(t *testing.T, b *bundle) {
	t.Helper()
	_, err := b.sqlDB.Exec(`DROP TRIGGER unstuck_audit_entry_no_update`)
	require.NoError(t, err)
	_, err = b.sqlDB.Exec(`UPDATE unstuck_audit_entry SET reason = 'nothing to see here' WHERE seq = 2`)
	require.NoError(t, err)
}

var (
	tags   = regexp.MustCompile(`<[^>]+>`)
	spaces = regexp.MustCompile(`\s+`)
)

var chainStatus = regexp.MustCompile(`(?s)<section class="[^"]*" role="(status|alert)" data-testid="chain-status" data-state="(\w+)">(.*?)</section>`)

// chain returns the role, state and text of the page's chain status.
func chain(t *testing.T, body string) (role, state, text string) {
	t.Helper()
	m := chainStatus.FindStringSubmatch(body)
	require.Len(t, m, 4, "the page shows the chain's status")
	return m[1], m[2], strings.TrimSpace(html.UnescapeString(spaces.ReplaceAllString(tags.ReplaceAllString(m[3], ""), " ")))
}

func TestAuditChainStatus(t *testing.T) {
	t.Parallel()

	t.Run("verified at most once per period", func(t *testing.T) {
		t.Parallel()
		var counted *countingTrail
		b := setup(t, func(c *web.Config) {
			counted = &countingTrail{AuditTrail: c.Trail}
			c.Trail, c.AuditVerifyEvery = counted, time.Hour
		})
		seedAudit(t, b)
		c := signIn(t, b, store.RoleAdmin)
		var wg sync.WaitGroup
		for range 12 {
			wg.Go(func() {
				resp, body := do(t, c, http.MethodGet, b.srv.URL+"/audit", nil)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				role, state, text := chain(t, body)
				require.Equal(t, []string{"status", "verified"}, []string{role, state})
				require.Contains(t, text, "Verified 3 entries, as of")
			})
		}
		wg.Wait()
		require.Equal(t, int64(1), counted.verifies.Load(), "concurrent views share one verification")

		tamper(t, b)
		_, body := do(t, c, http.MethodGet, b.srv.URL+"/audit", nil)
		_, state, text := chain(t, body)
		require.Equal(t, "verified", state, "the result is kept for the period")
		require.Regexp(t, `as of \d+s ago \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\)`, text)
		require.Regexp(t, `Head: 3:[0-9a-f]{64}`, text, "the head, to keep as an anchor")
		require.Equal(t, int64(1), counted.verifies.Load())
	})

	t.Run("a tampered chain shows an alert", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *web.Config) { c.AuditVerifyEvery = 50 * time.Millisecond })
		seedAudit(t, b)
		c := signIn(t, b, store.RoleAuditor)
		_, body := do(t, c, http.MethodGet, b.srv.URL+"/audit", nil)
		role, state, _ := chain(t, body)
		require.Equal(t, []string{"status", "verified"}, []string{role, state})

		tamper(t, b)
		time.Sleep(100 * time.Millisecond)
		_, body = do(t, c, http.MethodGet, b.srv.URL+"/audit", nil)
		role, state, text := chain(t, body)
		require.Equal(t, []string{"alert", "broken"}, []string{role, state})
		require.Contains(t, text, "Hash chain broken at seq 2: hash is not the MAC of the entry's content under audit key "+testAuditKeys.CurrentID()+": the entry was altered or forged without the key")
		require.Contains(t, text, "1 entry verified before it")
		require.Contains(t, body, `class="alert chain"`)
	})
}

// TestAuditChainStatusFollowsHead: a verification is shown only for the
// head it verified, not for a whole period: a console whose first /audit
// view found an empty trail never says "intact, 0 entries verified" above
// the entries appended since.
func TestAuditChainStatusFollowsHead(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *web.Config) { c.AuditVerifyEvery = time.Hour })
	c := signIn(t, b, store.RoleAuditor)
	_, body := do(t, c, http.MethodGet, b.srv.URL+"/audit", nil)
	_, state, text := chain(t, body)
	require.Equal(t, "verified", state)
	require.Contains(t, text, "Verified 0 entries", "an empty trail")

	seedAudit(t, b)
	_, body = do(t, c, http.MethodGet, b.srv.URL+"/audit", nil)
	_, state, text = chain(t, body)
	require.Equal(t, []string{"3", "2", "1"}, rows(body))
	require.Equal(t, "verified", state, text)
	require.NotContains(t, text, "Verified 0 entries")
	require.Contains(t, text, "Verified 3 entries")
	require.Contains(t, text, "Every entry is MACed with the audit key.")
	require.Regexp(t, `Head: 3:[0-9a-f]{64}`, text)
}

// TestAuditChainCheckpoint: /audit shows the last stored checkpoint and
// whether it verified, and one whose MAC does not verify is flagged.
func TestAuditChainCheckpoint(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *web.Config) { c.AuditVerifyEvery = 50 * time.Millisecond })
	c := signIn(t, b, store.RoleAuditor)
	seedAudit(t, b)
	_, body := do(t, c, http.MethodGet, b.srv.URL+"/audit", nil)
	_, _, text := chain(t, body)
	require.Contains(t, text, "No checkpoint yet: run console audit checkpoint")

	cp, _, err := b.trail.Checkpoint(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(3), cp.Seq)
	time.Sleep(100 * time.Millisecond) // past the period
	_, body = do(t, c, http.MethodGet, b.srv.URL+"/audit", nil)
	_, state, text := chain(t, body)
	require.Equal(t, "verified", state)
	require.Contains(t, body, `data-testid="checkpoint" data-ok="true"`)
	require.Regexp(t, `Last checkpoint: seq 3, made .* verified\.`, text)

	_, err = b.sqlDB.Exec(`UPDATE unstuck_audit_checkpoint SET seq = 2`)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	_, body = do(t, c, http.MethodGet, b.srv.URL+"/audit", nil)
	_, _, text = chain(t, body)
	require.Contains(t, body, `data-testid="checkpoint" data-ok="false"`)
	require.Contains(t, text, "Last checkpoint (seq 2")
	require.Contains(t, text, "its MAC does not verify under the audit key")
}

// slowTrail's verifications wait for release, or fail with err.
type slowTrail struct {
	web.AuditTrail
	release chan struct{}
	err     error
}

func (s *slowTrail) Verify(ctx context.Context, anchors ...audit.Anchor) (audit.Verification, error) {
	if s.err != nil {
		return audit.Verification{}, s.err
	}
	<-s.release
	return s.AuditTrail.Verify(ctx, anchors...)
}

func TestAuditChainStatusWhileVerifying(t *testing.T) {
	t.Parallel()

	t.Run("a long verification does not hold the page", func(t *testing.T) {
		t.Parallel()
		slow := &slowTrail{release: make(chan struct{})}
		b := setup(t, func(c *web.Config) { slow.AuditTrail = c.Trail; c.Trail = slow })
		t.Cleanup(func() { close(slow.release) })
		seedAudit(t, b)
		c := signIn(t, b, store.RoleAuditor)
		start := time.Now()
		resp, body := do(t, c, http.MethodGet, b.srv.URL+"/audit", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Less(t, time.Since(start), 10*time.Second)
		role, state, text := chain(t, body)
		require.Equal(t, []string{"status", "pending"}, []string{role, state})
		require.Contains(t, text, "Verifying the hash chain")
		require.Equal(t, []string{"3", "2", "1"}, rows(body), "the entries are listed meanwhile")
	})

	t.Run("a failed verification is not a broken chain", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *web.Config) { c.Trail = &slowTrail{AuditTrail: c.Trail, err: errors.New("database is gone")} })
		c := signIn(t, b, store.RoleAuditor)
		resp, body := do(t, c, http.MethodGet, b.srv.URL+"/audit", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		role, state, text := chain(t, body)
		require.Equal(t, []string{"status", "unknown"}, []string{role, state})
		require.Contains(t, text, "could not be verified")
		require.NotContains(t, body, "database is gone", "the error is logged, not shown")
	})
}

func TestAuditWithoutTrail(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *web.Config) { c.Trail = nil })
	c := signIn(t, b, store.RoleAuditor)
	for _, p := range []string{"/audit", "/audit/export?format=csv"} {
		resp, body := do(t, c, http.MethodGet, b.srv.URL+p, nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, p)
		require.Contains(t, body, "no audit trail", p)
	}
}

// failingExport writes part of an export, then fails.
type failingExport struct{ web.AuditTrail }

func (f failingExport) Export(_ context.Context, _ audit.Filter, w io.Writer, _ string) error {
	_, _ = io.WriteString(w, "seq,at\n1,")
	return errors.New("database is gone")
}

func TestAuditExportCutShort(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *web.Config) { c.Trail = failingExport{c.Trail} })
	c := signIn(t, b, store.RoleAuditor)
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/audit/export?format=csv", nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = io.ReadAll(resp.Body)
	require.Error(t, err, "a failed export is cut, not ended as if whole")
	require.Len(t, exports(t, b), 1, "recorded before it streamed")
}
