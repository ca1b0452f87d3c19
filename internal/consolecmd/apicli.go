package consolecmd

// "console api": a command line on the operator API under /api/v1
// (docs/api.md). Each command is one route: the table apiCommands says
// which, with which flags; one small client sends it with the token and
// reads the answer or the problem.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/unstuckhq/unstuck/internal/web"
)

const apiUsage = `Usage: console api [--url URL] [--token-file PATH] [--json] <group> <verb> [ID] [flags]

A command line on the operator API under /api/v1 (docs/api.md). The URL
comes from --url or UNSTUCK_API_URL; the token from UNSTUCK_API_TOKEN or
the first line of --token-file. There is no --token flag: a token on the
command line would stay in the shell's history. The token is never printed.

Commands:
  console api keys list [--state S --scope S --operation O --correlation-id C
                        --external-ref R --order newest|oldest --limit N]
  console api keys show ID
  console api keys forget ID --version V --reason R [--acknowledge-rerun]
  console api keys confirm ID --version V --reason R --outcome happened|did_not_happen [--external-ref R]
  console api keys verify ID --version V --reason R
  console api operations list [--status S --type T --correlation-id C --external-id E
                              --order newest|oldest --limit N]
  console api operations show ID
  console api operations retry ID --version V --reason R [--step S]
  console api operations confirm ID --version V --reason R --step S --outcome O [--external-ref R]
  console api operations compensate ID --version V --reason R
  console api operations resolve ID --version V --reason R --status S
  console api operations redrive ID --version V --reason R --mode M [--step S --accept-unprotected]
  console api bulk create keys|operations --action A [the list's filters]
                         [--all --group G --include-may-have-happened --resolve-to S]
  console api bulk submit ID --reason R --count N
  console api bulk show ID
  console api bulk approve|reject ID --reason R
  console api bulk pause|resume|cancel ID
  console api incidents list

A decision sends an Idempotency-Key: --idempotency-key K, or one made for
the invocation, printed when the call times out so that it can be retried
with it safely. Lists follow the API's pages up to --limit items.

Output: a table, or with --json the API's JSON as it is (a list's pages as
one object whose items are those of every page read). A decision held for
approval prints "held for approval: request N (URL)" and succeeds. A refused
or failed call exits 1 with the problem's code and detail; a stale version
prints the current one.

`

// apiCommand is one command of "console api": its route and the flags it
// takes beyond the global ones.
type apiCommand struct {
	group, verb string
	// id says the command takes an ID argument (a bulk create takes
	// keys or operations instead).
	id     bool
	method string
	// path is the route under the API's prefix, for the argument.
	path func(arg string) string
	// flags are the flags the command takes; query the ones sent in the
	// query string (a list's filters), as flag name → parameter name.
	flags []string
	// required are the flags it cannot do without.
	required []string
	// show prints the answer as a table.
	show func(w io.Writer, raw []byte) error
}

var (
	apiFilters   = []string{"from", "to", "order", "correlation-id"}
	keyFilters   = append([]string{"state", "scope", "operation", "external-ref"}, apiFilters...)
	opFilters    = append([]string{"status", "type", "external-id"}, apiFilters...)
	bulkSpecFlag = []string{"action", "all", "group", "include-may-have-happened", "resolve-to"}
	// bulkFilters are the filters of what a bulk create freezes.
	bulkFilters = map[string][]string{"keys": keyFilters, "operations": opFilters}
)

func idPath(format string) func(string) string {
	return func(id string) string { return fmt.Sprintf(format, url.PathEscape(id)) }
}

// apiCommands is every command of "console api".
var apiCommands = []apiCommand{
	{group: "keys", verb: "list", method: http.MethodGet, path: idPath("/keys%.0s"), flags: append([]string{"limit"}, keyFilters...), show: showKeys},
	{group: "keys", verb: "show", id: true, method: http.MethodGet, path: idPath("/keys/%s"), show: showKey},
	{group: "keys", verb: "forget", id: true, method: http.MethodPost, path: idPath("/keys/%s/forget"), flags: []string{"version", "reason", "acknowledge-rerun"}, required: []string{"version", "reason"}},
	{group: "keys", verb: "confirm", id: true, method: http.MethodPost, path: idPath("/keys/%s/confirm"), flags: []string{"version", "reason", "outcome", "external-ref"}, required: []string{"version", "reason", "outcome"}},
	{group: "keys", verb: "verify", id: true, method: http.MethodPost, path: idPath("/keys/%s/verify"), flags: []string{"version", "reason"}, required: []string{"version", "reason"}},
	{group: "operations", verb: "list", method: http.MethodGet, path: idPath("/operations%.0s"), flags: append([]string{"limit"}, opFilters...), show: showOperations},
	{group: "operations", verb: "show", id: true, method: http.MethodGet, path: idPath("/operations/%s"), show: showOperation},
	{group: "operations", verb: "retry", id: true, method: http.MethodPost, path: idPath("/operations/%s/retry"), flags: []string{"version", "reason", "step"}, required: []string{"version", "reason"}},
	{group: "operations", verb: "confirm", id: true, method: http.MethodPost, path: idPath("/operations/%s/confirm"), flags: []string{"version", "reason", "step", "outcome", "external-ref"}, required: []string{"version", "reason", "outcome"}},
	{group: "operations", verb: "compensate", id: true, method: http.MethodPost, path: idPath("/operations/%s/compensate"), flags: []string{"version", "reason"}, required: []string{"version", "reason"}},
	{group: "operations", verb: "resolve", id: true, method: http.MethodPost, path: idPath("/operations/%s/resolve"), flags: []string{"version", "reason", "status"}, required: []string{"version", "reason", "status"}},
	{group: "operations", verb: "redrive", id: true, method: http.MethodPost, path: idPath("/operations/%s/redrive"), flags: []string{"version", "reason", "mode", "step", "accept-unprotected"}, required: []string{"version", "reason", "mode"}},
	{group: "bulk", verb: "create", method: http.MethodGet, path: idPath("/%s/bulk"), flags: slices.Concat(bulkSpecFlag, keyFilters, opFilters), required: []string{"action"}},
	{group: "bulk", verb: "submit", id: true, method: http.MethodPost, path: idPath("/bulk/%s/submit"), flags: []string{"reason", "count"}, required: []string{"reason", "count"}},
	{group: "bulk", verb: "show", id: true, method: http.MethodGet, path: idPath("/bulk/%s"), show: showFields},
	{group: "bulk", verb: "approve", id: true, method: http.MethodPost, path: idPath("/approvals/%s/approve"), flags: []string{"reason"}, required: []string{"reason"}},
	{group: "bulk", verb: "reject", id: true, method: http.MethodPost, path: idPath("/approvals/%s/reject"), flags: []string{"reason"}, required: []string{"reason"}},
	{group: "bulk", verb: "pause", id: true, method: http.MethodPost, path: idPath("/bulk/%s/pause")},
	{group: "bulk", verb: "resume", id: true, method: http.MethodPost, path: idPath("/bulk/%s/resume")},
	{group: "bulk", verb: "cancel", id: true, method: http.MethodPost, path: idPath("/bulk/%s/cancel")},
	{group: "incidents", verb: "list", method: http.MethodGet, path: idPath("/incidents%.0s"), show: showIncidents},
}

// apiGlobalFlags are the flags every command takes.
var apiGlobalFlags = []string{"url", "token-file", "json", "idempotency-key", "timeout"}

// apiFlags are the flags of "console api", defined on one flag set: each
// command takes the global ones and those its apiCommand lists.
type apiFlags struct {
	fs        *flag.FlagSet
	url       *string
	tokenFile *string
	json      *bool
	idemKey   *string
	limit     *int
	timeout   *time.Duration
}

func newAPIFlags(getenv func(string) string) *apiFlags {
	fs := flag.NewFlagSet("api", flag.ContinueOnError)
	f := &apiFlags{fs: fs}
	f.url = fs.String("url", getenv("UNSTUCK_API_URL"), "the console's base `URL`, e.g. https://console.example.com (env UNSTUCK_API_URL)")
	f.tokenFile = fs.String("token-file", "", "read the API token from the first line of this `file` (else env UNSTUCK_API_TOKEN; there is no --token flag)")
	f.json = fs.Bool("json", false, "print the API's JSON as it is")
	f.idemKey = fs.String("idempotency-key", "", "the Idempotency-Key of a decision, 16 or more characters (default: one made for the invocation)")
	f.limit = fs.Int("limit", 50, "at most this many items of a list, following its pages")
	f.timeout = fs.Duration("timeout", time.Minute, "how long one call to the API may take")
	for _, s := range []struct{ name, usage string }{
		{"version", "the target's `version` as read: a changed target is refused with its current version (decisions)"},
		{"count", "the `number` of items the draft froze, as bulk show says (bulk submit)"},
		{"reason", "why: recorded in the audit trail (decisions)"},
		{"outcome", "happened or did_not_happen (keys confirm, operations confirm)"},
		{"external-ref", "the provider's reference (keys confirm, operations confirm); a filter of keys list"},
		{"step", "the step (operations retry, confirm, redrive)"},
		{"status", "the status to resolve to (operations resolve); a filter of operations list"},
		{"mode", "how to redrive (operations redrive)"},
		{"action", "the bulk action, e.g. forget or retry (bulk create)"},
		{"group", "an incident group's key: the items of that group (bulk create)"},
		{"resolve-to", "the status a bulk resolve sets (bulk create operations)"},
		{"state", "filter keys by state"},
		{"scope", "filter keys by scope"},
		{"operation", "filter keys by operation"},
		{"type", "filter operations by type"},
		{"external-id", "filter operations by external ID"},
		{"correlation-id", "filter by correlation ID"},
		{"order", "newest or oldest first"},
		{"from", "filter: from this `time` (RFC 3339)"},
		{"to", "filter: up to this `time` (RFC 3339)"},
	} {
		fs.String(s.name, "", s.usage)
	}
	for _, b := range []struct{ name, usage string }{
		{"acknowledge-rerun", "forget a key whose effect may have happened, knowing a retry runs it again (keys forget)"},
		{"accept-unprotected", "redrive steps that are not idempotent (operations redrive)"},
		{"all", "every item the filter selects, beyond the first page (bulk create)"},
		{"include-may-have-happened", "include keys whose effect may have happened (bulk create keys forget)"},
	} {
		fs.Bool(b.name, false, b.usage)
	}
	return f
}

// str is the value of the string or bool flag name.
func (f *apiFlags) str(name string) string { return f.fs.Lookup(name).Value.String() }

// runAPI is "console api …".
func runAPI(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newAPIFlags(getenv)
	f.fs.Usage = func() {
		fmt.Fprint(f.fs.Output(), apiUsage)
		f.fs.PrintDefaults()
	}
	// Flags may come before the group, between the words and after them.
	var words []string
	for rest := args; ; {
		if help, err := parseFlags(f.fs, rest, stdout, stderr); help || err != nil {
			return err
		}
		rest = f.fs.Args()
		if len(rest) == 0 {
			break
		}
		words, rest = append(words, rest[0]), rest[1:]
	}
	usageErr := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "console api: "+format+"\n", a...)
		return errUsage
	}
	if len(words) < 2 {
		fmt.Fprint(stderr, apiUsage)
		return errUsage
	}
	i := slices.IndexFunc(apiCommands, func(c apiCommand) bool { return c.group == words[0] && c.verb == words[1] })
	if i < 0 {
		return usageErr("unknown command %q (console api --help lists them)", strings.Join(words[:2], " "))
	}
	cmd := apiCommands[i]
	arg, want := "", 0
	if cmd.id || cmd.group == "bulk" && cmd.verb == "create" {
		want = 1
	}
	if len(words)-2 != want {
		if want == 1 {
			return usageErr("%s %s takes one argument (console api --help)", cmd.group, cmd.verb)
		}
		return usageErr("%s %s takes no argument, got %q", cmd.group, cmd.verb, words[2])
	}
	if want == 1 {
		arg = words[2]
	}
	var bad []string
	f.fs.Visit(func(fl *flag.Flag) {
		if !slices.Contains(apiGlobalFlags, fl.Name) && !slices.Contains(cmd.flags, fl.Name) {
			bad = append(bad, "--"+fl.Name)
		}
	})
	if len(bad) > 0 {
		return usageErr("%s %s does not take %s", cmd.group, cmd.verb, strings.Join(bad, ", "))
	}
	var absent []string
	for _, name := range cmd.required {
		if f.str(name) == "" {
			absent = append(absent, "--"+name)
		}
	}
	if len(absent) > 0 {
		return usageErr("%s %s needs %s", cmd.group, cmd.verb, strings.Join(absent, ", "))
	}
	if cmd.group == "bulk" && cmd.verb == "create" {
		filters, ok := bulkFilters[arg]
		if !ok {
			return usageErr("bulk create takes keys or operations, not %q", arg)
		}
		var other []string
		f.fs.Visit(func(fl *flag.Flag) {
			if slices.Contains(cmd.flags, fl.Name) && !slices.Contains(bulkSpecFlag, fl.Name) && !slices.Contains(filters, fl.Name) {
				other = append(other, "--"+fl.Name)
			}
		})
		if len(other) > 0 {
			return usageErr("bulk create %s does not filter by %s", arg, strings.Join(other, ", "))
		}
	}
	for _, name := range []string{"version", "count"} {
		if v := f.str(name); v != "" {
			if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
				return usageErr("--%s must be a whole number, not %q", name, v)
			}
		}
	}
	var missing []string
	if *f.url == "" {
		missing = append(missing, "the console's URL (--url or UNSTUCK_API_URL)")
	}
	token, err := apiToken(getenv, *f.tokenFile)
	if err != nil {
		return err
	}
	if token == "" {
		missing = append(missing, "an API token (UNSTUCK_API_TOKEN or --token-file)")
	}
	if len(missing) > 0 {
		return usageErr("missing %s", strings.Join(missing, " and "))
	}
	base, err := url.Parse(strings.TrimRight(*f.url, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return usageErr("--url must be an http(s) URL like https://console.example.com")
	}
	if *f.timeout <= 0 {
		return usageErr("--timeout must be positive")
	}
	c := &apiClient{base: base.String(), token: token, http: &http.Client{Timeout: *f.timeout}}
	return cmd.run(ctx, c, f, arg, stdout)
}

// apiToken is the API token: UNSTUCK_API_TOKEN, or the first line of
// file.
func apiToken(getenv func(string) string, file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(getenv("UNSTUCK_API_TOKEN")), nil
	}
	fh, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("api: the token file: %w", err)
	}
	defer fh.Close()
	line, err := bufio.NewReader(fh).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("api: reading the token file %s: %w", file, err)
	}
	return strings.TrimSpace(line), nil
}

// run sends the command's call and prints its answer.
func (cmd apiCommand) run(ctx context.Context, c *apiClient, f *apiFlags, arg string, stdout io.Writer) error {
	name := cmd.group + " " + cmd.verb
	switch {
	case cmd.verb == "list" && cmd.group != "incidents":
		return cmd.list(ctx, c, f, stdout)
	case cmd.group == "bulk" && cmd.verb == "create":
		return cmd.bulkCreate(ctx, c, f, arg, stdout)
	case cmd.method == http.MethodGet:
		res, err := c.call(ctx, name, http.MethodGet, cmd.path(arg), nil, "")
		if err != nil || *f.json {
			return printRaw(stdout, res.body, err)
		}
		return cmd.show(stdout, res.body)
	}
	key := *f.idemKey
	if key == "" {
		key = newIdempotencyKey()
	}
	res, err := c.call(ctx, name, http.MethodPost, cmd.path(arg), cmd.decisionBody(f), key)
	if isTimeout(err) {
		return fmt.Errorf("%w; retry it safely with --idempotency-key %s", err, key)
	}
	if err != nil || *f.json {
		return printRaw(stdout, res.body, err)
	}
	var ans struct {
		Applied    bool   `json:"applied"`
		Action     string `json:"action"`
		TargetKind string `json:"target_kind"`
		TargetID   string `json:"target_id"`
		Version    int64  `json:"version"`
		Removed    bool   `json:"removed"`
		ID         int64  `json:"id"`
		URL        string `json:"url"`
	}
	if err := json.Unmarshal(res.body, &ans); err != nil {
		return fmt.Errorf("api %s: the answer is not the API's JSON: %w", name, err)
	}
	switch {
	case res.status == http.StatusAccepted:
		fmt.Fprintf(stdout, "held for approval: request %d (%s)\n", ans.ID, c.base+ans.URL)
	case ans.Applied && ans.Removed:
		fmt.Fprintf(stdout, "applied %s to %s %s: it is removed\n", ans.Action, ans.TargetKind, ans.TargetID)
	case ans.Applied:
		fmt.Fprintf(stdout, "applied %s to %s %s: version %d\n", ans.Action, ans.TargetKind, ans.TargetID, ans.Version)
	default:
		fmt.Fprintf(stdout, "%s: request %d (%s)\n", name, ans.ID, c.base+ans.URL)
	}
	return nil
}

// decisionBody is the JSON body of a decision from its flags: only those
// set, by the form's field names.
func (cmd apiCommand) decisionBody(f *apiFlags) map[string]any {
	body := map[string]any{}
	for _, name := range cmd.flags {
		field := strings.ReplaceAll(name, "-", "_")
		switch name {
		case "version", "count":
			if v := f.str(name); v != "" {
				n, _ := strconv.ParseInt(v, 10, 64) // checked by runAPI
				body[map[string]string{"version": "version", "count": "confirm_count"}[name]] = n
			}
		case "acknowledge-rerun", "accept-unprotected":
			if f.str(name) == "true" {
				body[field] = true
			}
		default:
			if v := f.str(name); v != "" {
				body[field] = v
			}
		}
	}
	return body
}

// list reads the list's pages, following next, up to --limit items.
func (cmd apiCommand) list(ctx context.Context, c *apiClient, f *apiFlags, stdout io.Writer) error {
	if *f.limit < 1 {
		return fmt.Errorf("api %s %s: --limit must be at least 1", cmd.group, cmd.verb)
	}
	q := url.Values{}
	for _, name := range cmd.flags {
		if v := f.str(name); v != "" && name != "limit" {
			q.Set(strings.ReplaceAll(name, "-", "_"), v)
		}
	}
	path := cmd.path("")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var first map[string]json.RawMessage
	var items []json.RawMessage
	next := ""
	for path != "" && len(items) < *f.limit {
		res, err := c.call(ctx, cmd.group+" "+cmd.verb, http.MethodGet, path, nil, "")
		if err != nil {
			return err
		}
		var page map[string]json.RawMessage
		var its []json.RawMessage
		err = json.Unmarshal(res.body, &page)
		if err == nil {
			err = json.Unmarshal(page["items"], &its)
		}
		if err != nil || page == nil {
			return fmt.Errorf("api %s %s: the answer is not a page of the API", cmd.group, cmd.verb)
		}
		if first == nil {
			first = page
		}
		items = append(items, its...)
		next = ""
		_ = json.Unmarshal(page["next"], &next)
		path = next
		if len(its) == 0 {
			break // an empty page ends the list, whatever it links to
		}
	}
	if len(items) > *f.limit {
		items = items[:*f.limit]
	}
	if *f.json {
		delete(first, "prev")
		delete(first, "next")
		if next != "" {
			first["next"], _ = json.Marshal(next)
		}
		first["items"], _ = json.Marshal(items)
		out, err := json.Marshal(first)
		if err != nil {
			return err
		}
		_, err = stdout.Write(append(out, '\n'))
		return err
	}
	all, _ := json.Marshal(items)
	if err := cmd.show(stdout, all); err != nil {
		return err
	}
	var total int64
	if json.Unmarshal(first["total"], &total) == nil && total > int64(len(items)) {
		fmt.Fprintf(stdout, "(%d of %d shown; --limit to see more)\n", len(items), total)
	}
	return nil
}

// bulkCreate freezes a draft and prints its ID and count.
func (cmd apiCommand) bulkCreate(ctx context.Context, c *apiClient, f *apiFlags, kind string, stdout io.Writer) error {
	filters := bulkFilters[kind] // checked by runAPI
	q := url.Values{}
	for _, name := range slices.Concat(bulkSpecFlag, filters) {
		v := f.str(name)
		switch {
		case v == "" || v == "false":
		case v == "true":
			q.Set(strings.ReplaceAll(name, "-", "_"), "1")
		default:
			q.Set(strings.ReplaceAll(name, "-", "_"), v)
		}
	}
	res, err := c.call(ctx, "bulk create", http.MethodGet, cmd.path(kind)+"?"+q.Encode(), nil, "")
	if err != nil {
		return err
	}
	var ref struct {
		ID  int64  `json:"id"`
		URL string `json:"url"`
	}
	if err := json.Unmarshal(res.body, &ref); err != nil || ref.ID == 0 {
		return errors.New("api bulk create: the answer names no draft")
	}
	show, err := c.call(ctx, "bulk show", http.MethodGet, fmt.Sprintf("/bulk/%d", ref.ID), nil, "")
	if err != nil || *f.json {
		return printRaw(stdout, show.body, err)
	}
	var draft struct {
		Total int64 `json:"total"`
	}
	_ = json.Unmarshal(show.body, &draft)
	fmt.Fprintf(stdout, "draft %d froze %d items (%s)\nsubmit it: console api bulk submit %d --count %d --reason R\n", ref.ID, draft.Total, c.base+ref.URL, ref.ID, draft.Total)
	return nil
}

// apiClient calls the operator API with a bearer token.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

// call sends one call (do) of the command name to path, under the API's
// prefix unless it is there already (a page's next link), and returns
// the answer, or an error saying the problem.
func (c *apiClient) call(ctx context.Context, name, method, path string, body any, key string) (apiResult, error) {
	if !strings.HasPrefix(path, web.APIPrefix+"/") {
		path = web.APIPrefix + path
	}
	res, err := c.do(ctx, method, path, body, key)
	if err == nil {
		err = res.failure(name)
	}
	return res, err
}

// printRaw writes an answer's JSON as it is, unless err.
func printRaw(w io.Writer, raw []byte, err error) error {
	if err != nil {
		return err
	}
	_, err = w.Write(raw)
	return err
}

// apiResult is an answer of the API: its status and body, and the
// problem when it is one.
type apiResult struct {
	status  int
	body    []byte
	problem *apiProblem
}

// apiProblem is the API's problem+json.
type apiProblem struct {
	Title          string `json:"title"`
	Status         int    `json:"status"`
	Code           string `json:"code"`
	Detail         string `json:"detail"`
	Field          string `json:"field"`
	CurrentVersion *int64 `json:"current_version"`
}

// do sends one call: method on path (the API's path and query) with body
// as JSON when not nil, and key as its Idempotency-Key when not empty.
func (c *apiClient) do(ctx context.Context, method, path string, body any, key string) (apiResult, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return apiResult{}, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return apiResult{}, fmt.Errorf("api: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "unstuck-console-api")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", strconv.Quote(key))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// The URL error names the URL, never the token (a header).
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return apiResult{}, fmt.Errorf("api: %s %s: %w", method, c.base+path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return apiResult{}, fmt.Errorf("api: reading the answer of %s %s: %w", method, path, err)
	}
	res := apiResult{status: resp.StatusCode, body: raw}
	if resp.StatusCode >= 400 {
		res.problem = &apiProblem{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
		_ = json.Unmarshal(raw, res.problem)
	}
	return res, nil
}

// failure is the error of an answer that is a problem, or nil.
func (r apiResult) failure(name string) error {
	p := r.problem
	if p == nil {
		return nil
	}
	msg := fmt.Sprintf("api %s: %d %s", name, p.Status, p.Title)
	if p.Code != "" {
		msg += " (" + p.Code + ")"
	}
	if p.Detail != "" {
		msg += ": " + p.Detail
	}
	if p.Field != "" && !strings.Contains(p.Detail, strconv.Quote(p.Field)) {
		msg += " (field " + p.Field + ")"
	}
	if p.CurrentVersion != nil {
		msg += fmt.Sprintf(" The current version is %d.", *p.CurrentVersion)
	}
	return errors.New(msg)
}

// newIdempotencyKey is a key for one invocation's decision.
func newIdempotencyKey() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "console-api-" + hex.EncodeToString(b)
}

// isTimeout reports whether err is a call that timed out: its effect is
// unknown.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// age is how long ago t was, shortly.
func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

// short is s on one line, cut to n characters.
func short(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}

type apiKey struct {
	ID          int64     `json:"id"`
	Scope       string    `json:"scope"`
	Operation   string    `json:"operation"`
	Status      string    `json:"status"`
	ExternalRef string    `json:"external_ref"`
	LastError   string    `json:"last_error"`
	Attempts    int       `json:"attempts"`
	Version     int64     `json:"version"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	History     []struct {
		At      time.Time `json:"at"`
		Actor   string    `json:"actor"`
		Action  string    `json:"action"`
		Reason  string    `json:"reason"`
		Outcome string    `json:"outcome"`
	} `json:"history"`
}

// showAs decodes an answer as T and prints it with print, through a
// tabwriter.
func showAs[T any](print func(tw io.Writer, v T)) func(io.Writer, []byte) error {
	return func(w io.Writer, raw []byte) error {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("api: the answer is not the API's JSON: %w", err)
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		print(tw, v)
		return tw.Flush()
	}
}

// rows prints a table: its header, then each row's cells.
func rows(tw io.Writer, header string, cells [][]string) {
	fmt.Fprintln(tw, strings.ReplaceAll(header, " | ", "\t"))
	for _, r := range cells {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
}

// record prints a record's fields, one a line, then its sub-table (a
// key's history, an operation's steps) when it has rows.
func record(tw io.Writer, fields [][2]string, header string, cells [][]string) {
	for _, f := range fields {
		fmt.Fprintf(tw, "%s:\t%s\n", f[0], f[1])
	}
	if len(cells) > 0 {
		fmt.Fprintln(tw)
		rows(tw, header, cells)
	}
}

func itoa[N int | int64](n N) string { return strconv.FormatInt(int64(n), 10) }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

var showKeys = showAs(func(tw io.Writer, keys []apiKey) {
	var cells [][]string
	for _, k := range keys {
		cells = append(cells, []string{itoa(k.ID), k.Status, k.Scope, short(k.Operation, 40), age(k.CreatedAt), itoa(k.Attempts), itoa(k.Version), short(k.LastError, 50)})
	}
	rows(tw, "ID | STATE | SCOPE | OPERATION | AGE | ATTEMPTS | VERSION | LAST ERROR", cells)
})

var showKey = showAs(func(tw io.Writer, k apiKey) {
	var hist [][]string
	for _, h := range k.History {
		hist = append(hist, []string{stamp(h.At), h.Actor, h.Action, h.Outcome, short(h.Reason, 60)})
	}
	record(tw, [][2]string{
		{"id", itoa(k.ID)}, {"state", k.Status}, {"version", itoa(k.Version)}, {"scope", k.Scope}, {"operation", k.Operation},
		{"attempts", itoa(k.Attempts)}, {"external ref", short(k.ExternalRef, 80)}, {"last error", short(k.LastError, 120)},
		{"created", stamp(k.CreatedAt)}, {"updated", stamp(k.UpdatedAt)},
	}, "AT | ACTOR | ACTION | OUTCOME | REASON", hist)
})

type apiOperation struct {
	ID          string    `json:"id"`
	Type        string    `json:"type"`
	Status      string    `json:"status"`
	CurrentStep string    `json:"current_step"`
	LastError   string    `json:"last_error"`
	Version     int64     `json:"version"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	Steps       []struct {
		Name      string `json:"name"`
		Status    string `json:"status"`
		Attempts  int    `json:"attempts"`
		LastError string `json:"last_error"`
	} `json:"steps"`
}

var showOperations = showAs(func(tw io.Writer, list []apiOperation) {
	var cells [][]string
	for _, o := range list {
		cells = append(cells, []string{o.ID, o.Status, o.Type, short(o.CurrentStep, 30), age(o.CreatedAt), itoa(o.Version), short(o.LastError, 50)})
	}
	rows(tw, "ID | STATUS | TYPE | STEP | AGE | VERSION | LAST ERROR", cells)
})

var showOperation = showAs(func(tw io.Writer, o apiOperation) {
	var steps [][]string
	for _, s := range o.Steps {
		steps = append(steps, []string{s.Name, s.Status, itoa(s.Attempts), short(s.LastError, 60)})
	}
	record(tw, [][2]string{
		{"id", o.ID}, {"status", o.Status}, {"version", itoa(o.Version)}, {"type", o.Type}, {"current step", short(o.CurrentStep, 80)},
		{"last error", short(o.LastError, 120)}, {"created", stamp(o.CreatedAt)}, {"updated", stamp(o.UpdatedAt)},
	}, "STEP | STATUS | ATTEMPTS | LAST ERROR", steps)
})

type apiIncidents struct {
	Groups []struct {
		Kind      string    `json:"kind"`
		State     string    `json:"state"`
		Operation string    `json:"operation"`
		Step      string    `json:"step"`
		Class     string    `json:"class"`
		Message   string    `json:"message"`
		Count     int64     `json:"count"`
		LastSeen  time.Time `json:"last_seen"`
	} `json:"groups"`
}

var showIncidents = showAs(func(tw io.Writer, doc apiIncidents) {
	var cells [][]string
	for _, g := range doc.Groups {
		cells = append(cells, []string{g.Kind, g.State, short(g.Operation, 40), short(g.Step, 20), itoa(g.Count), age(g.LastSeen), short(g.Class+" "+g.Message, 50)})
	}
	rows(tw, "KIND | STATE | OPERATION | STEP | COUNT | LAST SEEN | ERROR", cells)
})

// showFields prints a JSON object's members that are not objects or
// lists, one a line.
func showFields(w io.Writer, raw []byte) error {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return err
	}
	names := make([]string, 0, len(doc))
	for k, v := range doc {
		switch v.(type) {
		case map[string]any, []any, nil:
		default:
			names = append(names, k)
		}
	}
	slices.Sort(names)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range names {
		fmt.Fprintf(tw, "%s:\t%v\n", strings.ReplaceAll(k, "_", " "), doc[k])
	}
	return tw.Flush()
}
