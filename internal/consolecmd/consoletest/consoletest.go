// Package consoletest holds what the console program's tests share across
// their packages: starting "console demo" in the test process, calling its
// HTTP routes, following its signups, reading saga records from its
// database. It takes the program's entry point as an argument, so that the
// program's own internal tests can use it without an import cycle.
package consoletest

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/demo"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

// RunFunc is the program's entry point, consolecmd.Run.
type RunFunc func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// StartDemo runs "console demo" on a free port over dbURL and returns its
// base URL. The demo stops when the test ends.
func StartDemo(t *testing.T, run RunFunc, dbURL string) string {
	t.Helper()
	base, _ := StartDemoWith(t, run, dbURL)
	return base
}

// StartDemoWith is StartDemo with extra flags; stop ends the demo before
// the test does (and is called by the test's cleanup otherwise).
func StartDemoWith(t *testing.T, run RunFunc, dbURL string, extra ...string) (base string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	args := append([]string{"demo", "--addr", "127.0.0.1:0", "--db", dbURL, "--traffic=false"}, extra...)
	go func() {
		done <- run(ctx, args, func(string) string { return "" }, pw, io.Discard)
		_ = pw.Close()
	}()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(stop)
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		if base, ok := strings.CutPrefix(lines.Text(), "listening on "); ok {
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return base, stop
		}
	}
	t.Fatalf("demo stopped before listening: %v", <-done)
	return "", nil
}

// Reply is an HTTP answer read whole; JSON is the body decoded as an
// object when it is one.
type Reply struct {
	Status int
	Header http.Header
	Body   string
	JSON   map[string]any
}

// Call sends one request with a JSON content type, the Idempotency-Key key
// when it is not empty, and hdr as name, value pairs.
func Call(t *testing.T, method, url, key, body string, hdr ...string) Reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := Reply{Status: resp.StatusCode, Header: resp.Header, Body: string(b)}
	_ = json.Unmarshal(b, &r.JSON)
	return r
}

// RequireProblem asserts that r is a problem+json answer with status and
// code and every member RFC 9457 names.
func RequireProblem(t *testing.T, r Reply, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.Status, "body: %s", r.Body)
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
	require.Equal(t, code, r.JSON["code"], "body: %s", r.Body)
	for _, member := range []string{"type", "title", "status", "detail"} {
		require.Contains(t, r.JSON, member)
	}
}

// ProviderCharges returns the demo's fake payment provider's charges.
func ProviderCharges(t *testing.T, base string) []map[string]any {
	t.Helper()
	st := Call(t, "GET", base+"/shop/provider/state", "", "")
	require.Equal(t, http.StatusOK, st.Status)
	var state struct {
		Charges []map[string]any `json:"charges"`
	}
	require.NoError(t, json.Unmarshal([]byte(st.Body), &state))
	return state.Charges
}

// SignupKey is an idempotency key unique to the test.
func SignupKey(t *testing.T, suffix string) string {
	return fmt.Sprintf(`"signup-%s-%s-%d"`, strings.ReplaceAll(t.Name(), "/", "-"), suffix, time.Now().UnixNano())
}

// PostSignup starts a signup and returns its operation ID.
func PostSignup(t *testing.T, base, key, body string) string {
	t.Helper()
	r := Call(t, "POST", base+"/shop/signups", key, body)
	require.Equal(t, http.StatusAccepted, r.Status, r.Body)
	id, _ := r.JSON["operation_id"].(string)
	require.NotEmpty(t, id, r.Body)
	require.Equal(t, "/shop/signups/"+id, r.Header.Get("Location"))
	return id
}

// GetSignup reads GET /shop/signups/{id}.
func GetSignup(t *testing.T, base, id string) demo.SignupView {
	t.Helper()
	r := Call(t, "GET", base+"/shop/signups/"+id, "", "")
	require.Equal(t, http.StatusOK, r.Status, r.Body)
	var v demo.SignupView
	require.NoError(t, json.Unmarshal([]byte(r.Body), &v))
	return v
}

// WaitSignup polls GET /shop/signups/{id} until the operation is in
// status, failing after within.
func WaitSignup(t *testing.T, base, id string, status sagadriver.Status, within time.Duration) demo.SignupView {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := GetSignup(t, base, id)
		if v.Status == string(status) {
			return v
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(v, "", "  ")
			t.Fatalf("signup %s not %s within %v:\n%s", id, status, within, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SagaRecords reads an operation and its history straight from the
// database (sqlite:PATH or a PostgreSQL URL), with no worker running.
func SagaRecords(t *testing.T, dbURL, id string) (sagadriver.Operation, []sagadriver.Event) {
	t.Helper()
	ctx := t.Context()
	var op sagadriver.Operation
	var evs []sagadriver.Event
	if path, ok := strings.CutPrefix(dbURL, "sqlite:"); ok {
		db, err := idemsqlite.Open(path)
		require.NoError(t, err)
		defer db.Close()
		d := sagasqlite.New(db)
		require.NoError(t, d.WithinTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			var err error
			if op, err = d.GetOperation(ctx, tx, id, false); err != nil {
				return err
			}
			evs, err = d.ListEvents(ctx, tx, id)
			return err
		}))
		return op, evs
	}
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	d := sagapgx.New(pool)
	require.NoError(t, d.WithinTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if op, err = d.GetOperation(ctx, tx, id, false); err != nil {
			return err
		}
		evs, err = d.ListEvents(ctx, tx, id)
		return err
	}))
	return op, evs
}

// WaitReady polls base/readyz until it answers 200, failing after 10 s.
func WaitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/readyz did not answer 200 in 10 s (last error: %v)", base, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SyncBuffer is a strings.Builder safe for concurrent writes: a child
// process's output read while it runs.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Session is a signed-in session on the console, sending requests as the
// console's own pages do.
type Session struct {
	base string
	c    *http.Client
}

// SignIn signs username in at base/login and returns the session; it
// fails the test unless the console answers 303.
func SignIn(t *testing.T, base, username, password string) *Session {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &Session{base: base, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	resp, body := c.Do(t, http.MethodPost, "/login", url.Values{"username": {username}, "password": {password}}, "")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "sign-in as %s: %s", username, PageText(body))
	return c
}

// Do sends a request as the console's own pages do (a form post is
// same-origin), with Accept if not empty, and returns the answer with its
// body read; redirects are not followed.
func (c *Session) Do(t *testing.T, method, path string, form url.Values, accept string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, c.base+path, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// PageText is a page's text without its markup, shortened, for a message.
func PageText(page string) string {
	s := regexp.MustCompile(`(?s)<(script|style)[^>]*>.*?</(script|style)>|<[^>]+>`).ReplaceAllString(page, " ")
	s = strings.Join(strings.Fields(html.UnescapeString(s)), " ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}

// DecisionForm returns the version and the form key of the decision form
// on page that posts to action.
func DecisionForm(t *testing.T, page, action string) (version, formKey string) {
	t.Helper()
	m := regexp.MustCompile(`action="` + regexp.QuoteMeta(action) + `">[\s\S]*?name="version" value="(\d+)"[\s\S]*?name="form_key" value="([^"]+)"`).FindStringSubmatch(page)
	require.Len(t, m, 3, "the page offers %s: %s", action, PageText(page))
	return m[1], html.UnescapeString(m[2])
}

// HiddenFields returns the hidden fields of the form on page that posts to
// action.
func HiddenFields(t *testing.T, page, action string) url.Values {
	t.Helper()
	start := strings.Index(page, `action="`+action+`"`)
	require.GreaterOrEqual(t, start, 0, "the page has a form to %s: %s", action, PageText(page))
	end := strings.Index(page[start:], "</form>")
	require.Positive(t, end, "the form to %s ends", action)
	form := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)"`).FindAllStringSubmatch(page[start:start+end], -1) {
		form.Set(html.UnescapeString(m[1]), html.UnescapeString(m[2]))
	}
	return form
}

// Freeze opens a bulk preview, which freezes its set and answers 303 to
// its draft; it returns the draft's path and page.
func (c *Session) Freeze(t *testing.T, preview string) (path, page string) {
	t.Helper()
	resp, body := c.Do(t, http.MethodGet, preview, nil, "")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the bulk preview freezes its set: %s", PageText(body))
	path = resp.Header.Get("Location")
	require.Regexp(t, `^/bulk/\d+$`, path)
	resp, page = c.Do(t, http.MethodGet, path, nil, "")
	require.Equal(t, http.StatusOK, resp.StatusCode, PageText(page))
	return path, page
}

// DemoDatabase is a database a demo can run on: its name for subtests and
// a function that makes a new empty one for t.
type DemoDatabase struct {
	Name string
	URL  func(t *testing.T) string
}

// DemoDatabases are the databases the demo runs its signups on: a SQLite
// file in t's temporary directory and a PostgreSQL database of its own.
// Under go test -short, the PostgreSQL one skips t (slowtest.Twin): the
// fast loop runs each journey once, on SQLite.
var DemoDatabases = []DemoDatabase{
	{"SQLite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "demo.db") }},
	{"PostgreSQL", func(t *testing.T) string {
		slowtest.Skip(t, slowtest.Twin)
		return pgtest.Database(t)
	}},
}

// SignupStep returns the step named name of the signup v; the test fails
// when there is none.
func SignupStep(t *testing.T, v demo.SignupView, name string) demo.SignupStep {
	t.Helper()
	for _, s := range v.Steps {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("signup %s has no step %s", v.OperationID, name)
	return demo.SignupStep{}
}

// Workspaces returns the provider's workspaces made for the operation id,
// as GET /shop/provider/state shows them.
func Workspaces(t *testing.T, base, id string) []demo.Workspace {
	t.Helper()
	r := Call(t, "GET", base+"/shop/provider/state", "", "")
	require.Equal(t, http.StatusOK, r.Status, r.Body)
	var st demo.ProviderState
	require.NoError(t, json.Unmarshal([]byte(r.Body), &st))
	require.NotNil(t, st.Workspaces, "the state lists workspaces: %s", r.Body)
	require.NotNil(t, st.Charges, "and still the charges: %s", r.Body)
	var out []demo.Workspace
	for _, w := range st.Workspaces {
		if strings.HasPrefix(w.IdempotencyKey, id+"/") {
			out = append(out, w)
		}
	}
	return out
}
