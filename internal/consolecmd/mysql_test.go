package consolecmd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/unstucktest/mysqltest"
)

// TestConsoleOnMySQL: the console on a MySQL database, from
// "console migrate" and "console user add" to the pages: sign in, list
// the keys, find a key by its raw value, forget it; the decision's audit
// entry is in the trail and the chain verifies. The operation pages say
// that sagas are not available on MySQL instead of failing, and the demo
// refuses MySQL for its sagas. The snapshotter runs there too (SPEC K14,
// K15): /incidents lists the group of the failing keys, its page lists
// exactly them, and the overview draws the trends.
func TestConsoleOnMySQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(mysqltest.NewDatabase(t))
	require.NoError(t, err)
	dbURL := "mysql://" + cfg.User + "@" + cfg.Addr + "/" + cfg.DBName
	for range 2 {
		_, _, err := runConsole(t, nil, "migrate", "--db", dbURL)
		require.NoError(t, err, "migrate (twice)")
	}
	var out, errOut bytes.Buffer
	require.NoError(t, runWithStdin(ctx, []string{"user", "add", "--db", dbURL, "--username", "ada", "--role", "support"},
		func(string) string { return "" }, strings.NewReader("a-long-enough-password\n"), &out, &errOut), errOut.String())

	db, err := openDatabase(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	require.NoError(t, db.CheckSchema(ctx), "migrate applied every line")
	keys, err := audit.NewKeyring([]byte("mysql-console-test-audit-key-0123456789"))
	require.NoError(t, err)
	db.useAuditKeys(keys)
	engine, err := idem.New(db.Store, idem.Config{Secret: []byte("mysql-console-test-secret-0123456789")})
	require.NoError(t, err)

	// A pending key: the provider timed out.
	const rawKey = "order-7f3a-ключ"
	_, err = idem.Run(ctx, engine, rawKey, "tenant:shop", func(ctx context.Context) (int, error) {
		return 0, idem.Uncertain(errors.New("timeout"))
	}, nil)
	require.ErrorIs(t, err, idem.ErrUncertain)
	page, err := db.Records.ListKeys(ctx, idemdriver.KeyFilter{Status: idemdriver.StatusPending})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	rec := page.Records[0]
	id := strconv.FormatInt(rec.ID, 10)

	// Two keys that failed with the same cause: one incident group,
	// apart from the first key's.
	var groupIDs []string
	for i, msg := range []string{"provider timed out after 31s", "provider timed out after 7s"} {
		_, err = idem.Run(ctx, engine, "order-timeout-"+strconv.Itoa(i), "tenant:shop", func(ctx context.Context) (int, error) {
			return 0, idem.Uncertain(errors.New(msg))
		}, nil)
		require.ErrorIs(t, err, idem.ErrUncertain)
	}
	page, err = db.Records.ListKeys(ctx, idemdriver.KeyFilter{Status: idemdriver.StatusPending})
	require.NoError(t, err)
	require.Len(t, page.Records, 3)
	for _, r := range page.Records {
		if r.ID != rec.ID {
			groupIDs = append(groupIDs, strconv.FormatInt(r.ID, 10))
		}
	}
	// The console's snapshotter, as serve starts it, every second.
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	snapFlags := addIncidentFlags(fs, func(string) string { return "" })
	require.NoError(t, fs.Parse([]string{"--snapshot-every", "1s"}))
	stopSnapshots := startSnapshots(ctx, db, snapFlags, slog.New(slog.DiscardHandler))
	var group store.IncidentGroup
	require.Eventually(t, func() bool {
		groups, err := db.Console.IncidentGroups(ctx, 0)
		require.NoError(t, err)
		for _, g := range groups {
			if g.Message == "outcome uncertain: provider timed out after <n>s" {
				group = g
			}
		}
		return group.Count == 2
	}, 20*time.Second, 100*time.Millisecond, "the snapshot groups the two failed keys")
	stopSnapshots()

	h, err := consoleHandler(db, engine, consoleOptions{idle: time.Hour, absolute: time.Hour}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var location string
	do := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, srv.URL+path, body)
		require.NoError(t, err)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		location = resp.Header.Get("Location")
		return resp.StatusCode, string(b)
	}

	status, _ := do(http.MethodPost, "/login", url.Values{"username": {"ada"}, "password": {"a-long-enough-password"}})
	require.Equal(t, http.StatusSeeOther, status, "ada signs in")

	status, body := do(http.MethodGet, "/", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Sagas are not available on MySQL", "the overview says why there are no operations")
	require.Contains(t, body, `id="trends-title"`, "the overview draws the trends")
	require.Regexp(t, `role="img" aria-label="pending: 3, [^"]* in 24 h"`, body, "the pending keys' trend")

	status, body = do(http.MethodGet, "/incidents", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `href="/incidents/`+group.Key+`"`, "the group is listed")
	require.Contains(t, body, `<code>outcome uncertain: provider timed out after &lt;n&gt;s</code>`)
	status, body = do(http.MethodGet, "/incidents/"+group.Key, nil)
	require.Equal(t, http.StatusOK, status, body)
	var items []string
	for _, m := range regexp.MustCompile(`<a href="/keys/(\d+)"`).FindAllStringSubmatch(body, -1) {
		items = append(items, m[1])
	}
	slices.Sort(items)
	slices.Sort(groupIDs)
	require.Equal(t, groupIDs, items, "the group's page lists exactly its keys")

	status, body = do(http.MethodGet, "/keys?state=pending", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `href="/keys/`+id+`"`, "the pending key is listed")

	status, body = do(http.MethodPost, "/search", url.Values{"q": {rawKey}})
	require.Equal(t, http.StatusSeeOther, status, body)
	require.Equal(t, "/keys/"+id, location, "the raw key finds its one record")

	status, body = do(http.MethodGet, "/operations", nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Contains(t, body, "Sagas are not available on MySQL")

	status, body = do(http.MethodGet, "/keys/"+id, nil)
	require.Equal(t, http.StatusOK, status, body)
	m := regexp.MustCompile(`action="/keys/` + id + `/forget">[\s\S]*?name="form_key" value="([^"]+)"`).FindStringSubmatch(body)
	require.Len(t, m, 2, "the key page offers forget")
	status, body = do(http.MethodPost, "/keys/"+id+"/forget", url.Values{"acknowledge_rerun": {"yes"}, "version": {strconv.FormatInt(rec.Version, 10)},
		"reason": {"the provider has no such charge"}, "form_key": {m[1]}})
	require.Equal(t, http.StatusSeeOther, status, body)

	_, ok, err := db.Records.KeyByID(ctx, rec.ID)
	require.NoError(t, err)
	require.False(t, ok, "forgotten")
	entries, _, err := db.Trail.List(ctx, audit.Filter{TargetKind: "key", TargetID: id})
	require.NoError(t, err)
	require.Len(t, entries, 1, "one decision, one audit entry, in its transaction")
	require.Equal(t, "key.forget", entries[0].Action)
	require.Equal(t, "ada", entries[0].Actor)
	require.Equal(t, audit.OutcomeApplied, entries[0].Outcome)
	v, err := db.Trail.Verify(ctx)
	require.NoError(t, err)
	require.True(t, v.OK, "the chain verifies: %s", v.Problem)

	// The key runs again.
	res, err := idem.Run(ctx, engine, rawKey, "tenant:shop", func(context.Context) (int, error) { return 5, nil }, nil)
	require.NoError(t, err)
	require.False(t, res.Replayed)

	// Sagas are refused with why, not crashed into: by the runner, by
	// "console demo" (whose signups are sagas) before it touches the
	// database, and by "console serve" when a saga queue is asked for.
	_, _, err = startSagas(ctx, db, nil, slog.New(slog.DiscardHandler))
	require.ErrorIs(t, err, errNoSagasOnMySQL)
	_, _, err = runConsole(t, nil, "demo", "--db", dbURL, "--addr", "127.0.0.1:0")
	require.ErrorIs(t, err, errNoSagasOnMySQL)
	_, _, err = runConsole(t, map[string]string{"UNSTUCK_SECRET": "mysql-console-test-secret-0123456789",
		"UNSTUCK_AUDIT_KEY": "mysql-console-test-audit-key-0123456789"}, "serve", "--db", dbURL, "--saga-queue", "payments", "--addr", "127.0.0.1:0")
	require.ErrorIs(t, err, errNoSagasOnMySQL)
	require.ErrorContains(t, err, "--saga-queue")
}

// TestMySQLURLs: DSNs are recognised and redacted without their password.
func TestMySQLURLs(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"mysql://app:s3cret@db:3306/shop":  "mysql://app:xxxxx@db:3306/shop",
		"app:s3cret@tcp(db:3306)/shop?x=1": "mysql://app:xxxxx@db:3306/shop",
		"mysql://app@db/shop":              "mysql://app@db:3306/shop",
	} {
		require.True(t, isMySQL(raw), raw)
		require.Equal(t, want, redactURL(raw))
	}
	require.False(t, isMySQL("postgres://u@h/db"))
	require.False(t, isMySQL("sqlite:/tmp/x.db"))
	_, err := openUnmigrated(context.Background(), "mysql://app:s3cret@127.0.0.1:1/shop?timeout=1s")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
}
