package consolecmd

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
)

// TestAPICLI: "console api" against the program as it serves, on SQLite
// and PostgreSQL, with tokens made by "console token create": it lists
// and shows keys, confirms a pending payment and sees the change, reports
// a stale version with the current one, is refused what the token's role
// may not do, holds a decision for approval, and cannot run without a
// token.
func TestAPICLI(t *testing.T) {
	t.Parallel()
	for _, d := range consoletest.DemoDatabases {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			url := d.URL(t)
			base, _ := consoletest.StartDemoWith(t, run, url, "--approval-required", "bulk,keys.forget")
			oncall, support := createToken(t, url, "cli-oncall", "oncall"), createToken(t, url, "cli-support", "support")

			order := consoletest.Call(t, "POST", base+"/shop/orders", `"cli-order-0000000001"`, `{"sku":"lamp","qty":1}`)
			require.Equal(t, http.StatusCreated, order.Status, order.Body)
			body := fmt.Sprintf(`{"order_id":%q,"amount_cents":1999}`, order.JSON["id"])
			lost := consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", `"cli-payment-00000001"`, body)
			require.Equal(t, http.StatusAccepted, lost.Status, lost.Body)

			env := map[string]string{"UNSTUCK_API_URL": base, "UNSTUCK_API_TOKEN": oncall}
			api := func(env map[string]string, args ...string) (string, error) {
				t.Helper()
				out, errOut, err := runConsole(t, env, append([]string{"api"}, args...)...)
				require.NotContains(t, out+errOut+fmt.Sprint(err), oncall, "the token is never printed")
				return out + errOut, err
			}

			// Without a token or a URL: a usage error naming what is missing.
			out, err := api(map[string]string{"UNSTUCK_API_URL": base}, "keys", "list")
			require.ErrorIs(t, err, errUsage)
			require.Equal(t, 2, exitStatus(err))
			require.Contains(t, out, "UNSTUCK_API_TOKEN")
			out, err = api(map[string]string{"UNSTUCK_API_TOKEN": oncall}, "keys", "list")
			require.ErrorIs(t, err, errUsage)
			require.Contains(t, out, "UNSTUCK_API_URL")

			// A flag the command does not take, a missing required one.
			_, err = api(env, "keys", "show", "1", "--reason", "x")
			require.ErrorIs(t, err, errUsage)
			out, err = api(env, "keys", "forget", "1", "--reason", "x")
			require.ErrorIs(t, err, errUsage)
			require.Contains(t, out, "--version")

			out, err = api(env, "operations", "list", "--limit", "2")
			require.NoError(t, err, out)
			require.Regexp(t, `(?m)^ID +STATUS +TYPE`, out)
			out, err = api(env, "incidents", "list")
			require.NoError(t, err, out)
			require.Regexp(t, `(?m)^KIND +STATE`, out)

			// The pending payment, by the JSON of the list, which parses.
			out, err = api(env, "--json", "keys", "list", "--state", "pending", "--operation", "POST /shop/payments")
			require.NoError(t, err, out)
			var page struct {
				Items []struct {
					ID      int64  `json:"id"`
					Status  string `json:"status"`
					Version int64  `json:"version"`
				} `json:"items"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &page), out)
			require.Len(t, page.Items, 1, out)
			key := page.Items[0]
			require.Equal(t, "pending", key.Status)
			id := fmt.Sprint(key.ID)

			out, err = api(env, "keys", "list", "--limit", "3")
			require.NoError(t, err, out)
			require.Regexp(t, `(?m)^ID +STATE +SCOPE +OPERATION +AGE +ATTEMPTS`, out)
			require.LessOrEqual(t, strings.Count(out, "\n"), 5, "a header, at most 3 rows and the count:\n%s", out)

			out, err = api(env, "keys", "show", id)
			require.NoError(t, err, out)
			require.Regexp(t, `state: +pending`, out)

			// A stale version: refused, with the current one.
			confirm := []string{"keys", "confirm", id, "--reason", "seen at the provider", "--outcome", "happened", "--external-ref", "ch_cli_1"}
			_, err = api(env, append(confirm, "--version", fmt.Sprint(key.Version-1))...)
			require.Error(t, err)
			require.Equal(t, 1, exitStatus(err))
			require.ErrorContains(t, err, "stale")
			require.ErrorContains(t, err, fmt.Sprintf("The current version is %d.", key.Version))

			// Flags after the ID, the token from a file.
			tokenFile := filepath.Join(t.TempDir(), "token")
			require.NoError(t, os.WriteFile(tokenFile, []byte(oncall+"\n"), 0o600))
			out, err = api(map[string]string{"UNSTUCK_API_URL": base}, append([]string{"--token-file", tokenFile}, append(confirm, "--version", fmt.Sprint(key.Version))...)...)
			require.NoError(t, err, out)
			require.Contains(t, out, "applied key.confirm_happened to key "+id)

			out, err = api(env, "keys", "show", id)
			require.NoError(t, err, out)
			require.NotRegexp(t, `state: +pending`, out)
			require.Contains(t, out, "ch_cli_1")
			require.Regexp(t, `token:cli-oncall +key\.confirm_happened`, out)

			// A support token may not compensate.
			_, err = api(map[string]string{"UNSTUCK_API_URL": base, "UNSTUCK_API_TOKEN": support},
				"operations", "compensate", "op-any", "--version", "1", "--reason", "not mine to do")
			require.Error(t, err)
			require.Equal(t, 1, exitStatus(err))
			require.ErrorContains(t, err, "forbidden")

			// A list longer than a page: its pages are followed up to --limit.
			for i := range 55 {
				r := consoletest.Call(t, "POST", base+"/shop/orders", fmt.Sprintf(`"cli-order-page-%05d"`, i), `{"sku":"lamp","qty":1}`)
				require.Equal(t, http.StatusCreated, r.Status, r.Body)
			}
			out, err = api(env, "--json", "keys", "list", "--operation", "POST /shop/orders", "--limit", "53")
			require.NoError(t, err, out)
			var long struct {
				Items []json.RawMessage `json:"items"`
				Total int64             `json:"total"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &long), out)
			require.Len(t, long.Items, 53, "more than the first page")
			require.EqualValues(t, 56, long.Total)
			out, err = api(env, "keys", "list", "--operation", "POST /shop/orders", "--limit", "100")
			require.NoError(t, err, out)
			require.Equal(t, 56, strings.Count(out, "POST /shop/orders"), "every page read:\n%s", out)

			// A forget is held for a second person's approval.
			out, err = api(env, "--json", "keys", "show", id)
			require.NoError(t, err, out)
			var rec struct {
				Version int64 `json:"version"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &rec), out)
			out, err = api(env, "keys", "forget", id, "--version", fmt.Sprint(rec.Version), "--reason", "the charge was refunded", "--acknowledge-rerun")
			require.NoError(t, err, out)
			held := regexp.MustCompile(`held for approval: request (\d+) \(` + regexp.QuoteMeta(base) + `/api/v1/bulk/\d+\)`).FindStringSubmatch(out)
			require.NotNil(t, held, out)
			out, err = api(env, "bulk", "show", held[1])
			require.NoError(t, err, out)
			require.Regexp(t, `status: +waiting_approval`, out)

			out, err = api(env, "bulk", "create", "operations", "--action", "retry", "--state", "pending")
			require.ErrorIs(t, err, errUsage)
			require.Contains(t, out, "does not filter by --state")

			// A bulk forget: frozen as a draft, then held for approval.
			out, err = api(env, "bulk", "create", "keys", "--action", "forget", "--state", "completed", "--include-may-have-happened")
			require.NoError(t, err, out)
			draft := regexp.MustCompile(`draft (\d+) froze (\d+) items`).FindStringSubmatch(out)
			require.NotNil(t, draft, out)
			out, err = api(env, "bulk", "submit", draft[1], "--count", draft[2], "--reason", "the provider has none of these")
			require.NoError(t, err, out)
			require.Contains(t, out, "held for approval: request "+draft[1])
		})
	}
}

// createToken makes an API token with role through "console token
// create" and returns its secret.
func createToken(t *testing.T, dbURL, name, role string) string {
	t.Helper()
	out, errOut, err := runConsole(t, map[string]string{"UNSTUCK_AUDIT_KEY": testAuditKey}, "token", "create", "--db", dbURL, "--name", name, "--role", role)
	require.NoError(t, err, errOut)
	m := regexp.MustCompile(`token \(shown once\): (unstuck_\S{43})`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	return m[1]
}

// TestAPICLITimeout: a decision whose answer does not come in time
// prints the Idempotency-Key it was sent with, made for the invocation or
// given, so that running it again with that key cannot apply it twice.
func TestAPICLITimeout(t *testing.T) {
	t.Parallel()
	// A server that takes the request and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	env := map[string]string{"UNSTUCK_API_URL": "http://" + ln.Addr().String(), "UNSTUCK_API_TOKEN": "unstuck_" + strings.Repeat("A", 43)}
	forget := []string{"api", "--timeout", "200ms", "keys", "forget", "42", "--version", "3", "--reason", "the provider has no such charge"}
	_, _, err = runConsole(t, env, forget...)
	require.Error(t, err)
	require.Equal(t, 1, exitStatus(err))
	require.Regexp(t, `retry it safely with --idempotency-key console-api-[0-9a-f]{24}`, err.Error())
	require.NotContains(t, err.Error(), env["UNSTUCK_API_TOKEN"])
	_, _, err = runConsole(t, env, append(forget, "--idempotency-key", "deploy-2026-12-06-forget-42")...)
	require.ErrorContains(t, err, "--idempotency-key deploy-2026-12-06-forget-42")
}
