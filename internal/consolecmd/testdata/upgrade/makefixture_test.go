// This file is not part of the module: it lives under testdata, which the Go
// tool ignores. scripts/make-upgrade-fixtures.sh copies it into a checkout of
// the previous main (7f2d0fc, package main of cmd/console there) and runs it
// with the old code, to make the databases that internal/consolecmd's upgrade test
// restores. Every record in them is written by that old code: the demo's
// shop and signups over HTTP, the engine, reconciliation, and the console's
// operator decisions and sign-ins.

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/auth"
	"github.com/unstuckhq/unstuck/internal/demo"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// The fixture's secrets and its one non-demo account; the upgrade test
// knows them.
const (
	fixtureSecret   = "upgrade-fixture-secret-0123456789abcdef"
	fixtureAuditKey = "upgrade-fixture-audit-key-0123456789abcdef"
	fixtureUser     = "ada"
	fixturePassword = "ada-upgrade-fixture-pw"
)

// TestMakeUpgradeFixture fills the database at UNSTUCK_FIXTURE_DB (new and
// empty) and, for SQLite, writes a compact copy of it to UNSTUCK_FIXTURE_OUT
// (VACUUM INTO) while a processing record is still held.
func TestMakeUpgradeFixture(t *testing.T) {
	dbURL := os.Getenv("UNSTUCK_FIXTURE_DB")
	if dbURL == "" {
		t.Skip("run by scripts/make-upgrade-fixtures.sh")
	}
	ctx := context.Background()
	env := map[string]string{"UNSTUCK_SECRET": fixtureSecret, "UNSTUCK_AUDIT_KEY": fixtureAuditKey}
	base := startFixtureDemo(t, dbURL, env)

	// Keys in every status, through the shop.
	for i := range 3 {
		key := fmt.Sprintf(`"fixture-order-%05d"`, i)
		body := fmt.Sprintf(`{"sku":"sku-%d","qty":%d}`, i, 1+i)
		first := call(t, "POST", base+"/shop/orders", key, body, "Authorization", "Bearer demo-alice")
		require.Equal(t, http.StatusCreated, first.status, first.body)
		again := call(t, "POST", base+"/shop/orders", key, body, "Authorization", "Bearer demo-alice")
		require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		orderID := first.json["id"].(string)
		for _, fail := range []string{"", "timeout_after_effect", "timeout_before_effect", "permanent", "error_500"} {
			u := base + "/shop/payments"
			if fail != "" {
				u += "?fail=" + fail
			}
			r := call(t, "POST", u, fmt.Sprintf(`"fixture-pay-%s-%05d"`, strings.ReplaceAll(fail, "_", "-"), i),
				fmt.Sprintf(`{"order_id":%q,"amount_cents":%d}`, orderID, 1000+i), "Authorization", "Bearer demo-bob")
			require.Less(t, r.status, 600, r.body)
		}
	}
	require.Equal(t, http.StatusCreated, call(t, "POST", base+"/shop/exports", `"fixture-export-00001"`, `{"format":"csv"}`).status)

	// Saga operations in several statuses, with steps and events.
	var signups []string
	for i, c := range []struct {
		mode   string
		email  string
		status sagadriver.Status
	}{
		{"", "ann@example.com", sagadriver.StatusCompleted},
		{"", "drift@example.com", sagadriver.StatusCompleted},
		{"", "ann@example.com", sagadriver.StatusFailed}, // the email is taken
		{demo.SignupWorkspaceTimeoutAfterEffect, "slow@example.com", sagadriver.StatusCompleted},
		{"workspace_permanent", "perm@example.com", sagadriver.StatusCompensated},
		{"workspace_compensation_fails", "stuck@example.com", sagadriver.StatusReviewRequired},
		{"welcome_permanent", "nobody@example.com", sagadriver.StatusReviewRequired},
	} {
		body := `{"email":"` + c.email + `"}`
		if c.mode != "" {
			body = `{"email":"` + c.email + `","fail":"` + c.mode + `"}`
		}
		id := postSignup(t, base, fmt.Sprintf(`"fixture-signup-%05d"`, i), body)
		// One at a time: the taken email must find the first account.
		waitSignup(t, base, id, c.status, time.Minute)
		signups = append(signups, id)
	}

	db, err := openDatabase(ctx, dbURL)
	require.NoError(t, err)
	defer db.Close()
	keys, err := auditKeysFromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	db.useAuditKeys(keys)

	// A finding: the workspace of a completed signup vanishes at the
	// provider, and reconciliation raises the operation to review.
	var sdb demo.SignupDB = sqlSignupDB{db.SQL}
	if db.Pool != nil {
		sdb = pgxSignupDB{db.Pool}
	}
	ws, err := demo.NewWorkspaceProviderDB(ctx, sdb)
	require.NoError(t, err)
	drift := signups[1]
	ws.Remove(drift + "/workspace")
	found := reconcileAfterRestart(ctx, t, db)
	require.Len(t, found, 1, "%+v", found)
	require.Equal(t, "missing_external", found[0].Kind)

	// Keys of the engine's own: unavailable (twice), processing under a
	// live lease and processing past its lease (stuck).
	engine, err := idem.New(db.Store, idem.WithSecret([]byte(fixtureSecret)))
	require.NoError(t, err)
	for _, k := range []string{"receipt-fixture-1", "receipt-fixture-2"} {
		_, err := idem.Run(ctx, engine, k, "job:fixture", func(ctx context.Context) (float64, error) {
			_ = idem.Annotate(ctx, idem.Annotation{ExternalRef: "mail-" + k, ResourceIDs: []string{"receipt:" + k}})
			return math.NaN(), nil
		}, idem.WithOperation("demo:send-receipt"))
		require.Error(t, err, "a NaN result cannot be stored: unavailable")
	}
	held := make(chan struct{})
	for _, j := range []struct {
		op    string
		lease time.Duration
	}{{"demo:nightly-export", 24 * time.Hour}, {"demo:stalled-sync", time.Second}} {
		go func() {
			_, _ = idem.Run(context.WithoutCancel(ctx), engine, j.op+"-fixture", "job:fixture", func(ctx context.Context) (struct{}, error) {
				_ = idem.Annotate(ctx, idem.Annotation{CorrelationID: "batch-" + j.op})
				held <- struct{}{}
				select {} // held until the process exits: the record stays processing
			}, idem.WithOperation(j.op), idem.WithLease(j.lease))
		}()
		<-held
	}

	// Operator decisions, each with its audit entry.
	keyOps, err := ops.NewKeys(engine, db.Console, db.Trail)
	require.NoError(t, err)
	oncall := ops.Actor{Username: "oncall", Role: store.RoleOncall, RequestID: "fixture-req", ClientAddr: "127.0.0.1", UserAgent: "fixture"}
	pending := listKeys(t, db, idem.StatusPending)
	require.GreaterOrEqual(t, len(pending), 4, "timeout_after_effect and timeout_before_effect payments")
	_, err = keyOps.Decide(ctx, oncall, ops.KeyDecision{RecordID: pending[0].ID, Version: pending[0].Version,
		Action: idem.OperatorConfirmHappened, ExternalRef: "ch_fixture_confirmed", Reason: "the provider shows the charge"})
	require.NoError(t, err)
	_, err = keyOps.Decide(ctx, oncall, ops.KeyDecision{RecordID: pending[1].ID, Version: pending[1].Version,
		Action: idem.OperatorConfirmNotHappened, Reason: "the provider has no such charge"})
	require.NoError(t, err)
	_, err = keyOps.Decide(ctx, oncall, ops.KeyDecision{RecordID: pending[2].ID, Version: pending[2].Version + 7,
		Action: idem.OperatorForget, Reason: "a stale form: refused and audited"})
	require.ErrorIs(t, err, ops.ErrStale)
	unavailable := listKeys(t, db, idem.StatusUnavailable)
	require.Len(t, unavailable, 2)
	_, err = keyOps.Decide(ctx, oncall, ops.KeyDecision{RecordID: unavailable[0].ID, Version: unavailable[0].Version,
		Action: idem.OperatorForget, Reason: "the receipt is sent again by hand"})
	require.NoError(t, err)
	require.NoError(t, ops.RecordDenied(ctx, db.Trail, ops.Actor{Username: "auditor", Role: store.RoleAuditor}, "key.forget", "key", fmt.Sprint(pending[3].ID)))

	var skew clockSkew
	opOps, release, err := operationDecisions(ctx, db, saga.QueueDefault, prometheus.NewRegistry(), &skew, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer release()
	driftOp := getSignup(t, base, drift)
	require.Equal(t, string(sagadriver.StatusReviewRequired), driftOp.Status)
	_, err = opOps.Decide(ctx, oncall, ops.OperationDecision{ID: drift, Version: driftOp.Version, Action: ops.OperationResolve,
		ResolveTo: sagadriver.StatusCompleted, Reason: "the workspace was deleted by its owner"})
	require.NoError(t, err)

	// The console's own tables: a user of the operator's (not a demo
	// account) and sessions from signing in.
	hash, err := auth.Hash(fixturePassword)
	require.NoError(t, err)
	_, err = db.Console.CreateUser(ctx, fixtureUser, store.RoleOncall, hash)
	require.NoError(t, err)
	for _, who := range []string{"oncall", "auditor"} {
		signIn(t, base, who, "demo-"+who)
	}

	if out := os.Getenv("UNSTUCK_FIXTURE_OUT"); out != "" && db.SQL != nil {
		_, err := db.SQL.ExecContext(ctx, "VACUUM INTO ?", out)
		require.NoError(t, err)
	}
	t.Logf("fixture made: %d signups", len(signups))
}

// startFixtureDemo runs "console demo" with env over dbURL, without its
// traffic, and returns its base URL; it stops when the test ends.
func startFixtureDemo(t *testing.T, dbURL string, env map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--addr", "127.0.0.1:0", "--db", dbURL, "--traffic=false"}, func(k string) string { return env[k] }, pw, io.Discard)
		_ = pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		if base, ok := strings.CutPrefix(lines.Text(), "listening on "); ok {
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return base
		}
	}
	t.Fatalf("demo stopped before listening: %v", <-done)
	return ""
}

func listKeys(t *testing.T, db *database, status idem.Status) []idem.Record {
	t.Helper()
	page, err := db.Console.ListKeys(context.Background(), store.KeyFilter{Status: status, Limit: 100})
	require.NoError(t, err)
	return page.Records
}

// signIn signs in on the demo's console, which stores a session.
func signIn(t *testing.T, base, username, password string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(url.Values{"username": {username}, "password": {password}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed in as %s", username)
}
