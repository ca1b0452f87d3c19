package consolecmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
)

// TestAPICLIOnServe: "console api" against "console serve" as production
// runs it (SPEC K25), on SQLite and PostgreSQL: an application's key left
// pending by a lost answer is found, confirmed and shown through the
// command line with a service token made by "console token create", and
// the decision is audited as the token.
func TestAPICLIOnServe(t *testing.T) {
	t.Parallel()
	for _, d := range consoletest.DemoDatabases {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			url := d.URL(t)
			const secret = "serve-cli-secret-0123456789abcdefgh"
			_, errOut, err := runConsole(t, nil, "migrate", "--db", url)
			require.NoError(t, err, errOut)

			// The application: a charge whose answer was lost.
			db, err := openDatabase(context.Background(), url)
			require.NoError(t, err)
			engine, err := idem.New(db.Store, idem.Config{Secret: []byte(secret)})
			require.NoError(t, err)
			_, err = idem.Run(t.Context(), engine, "charge-serve-cli-1", "tenant:serve-cli", func(context.Context) (int, error) {
				return 0, idem.Uncertain(errors.New("provider timeout"))
			}, &idem.RunOpts{Operation: "POST /charges"})
			require.ErrorIs(t, err, idem.ErrUncertain)
			db.Close()

			token := createToken(t, url, "serve-oncall", "oncall")
			base, stop := startServe(t, map[string]string{"UNSTUCK_DB": url, "UNSTUCK_SECRET": secret, "UNSTUCK_AUDIT_KEY": testAuditKey})
			defer stop()
			env := map[string]string{"UNSTUCK_API_URL": base, "UNSTUCK_API_TOKEN": token}
			api := func(args ...string) string {
				t.Helper()
				out, errOut, err := runConsole(t, env, append([]string{"api"}, args...)...)
				require.NoError(t, err, out+errOut)
				require.NotContains(t, out+errOut, token, "the token is never printed")
				return out
			}

			out := api("--json", "keys", "list", "--state", "pending", "--scope", "tenant:serve-cli")
			var page struct {
				Items []struct {
					ID      int64 `json:"id"`
					Version int64 `json:"version"`
				} `json:"items"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &page), out)
			require.Len(t, page.Items, 1, out)
			id := fmt.Sprint(page.Items[0].ID)

			out = api("keys", "confirm", id, "--version", fmt.Sprint(page.Items[0].Version), "--reason", "the provider's dashboard shows the charge",
				"--outcome", "happened", "--external-ref", "ch_serve_cli_1")
			require.Contains(t, out, "applied key.confirm_happened to key "+id)
			out = api("keys", "show", id)
			require.NotRegexp(t, `state: +pending`, out)
			require.Contains(t, out, "ch_serve_cli_1")
			require.Regexp(t, `token:serve-oncall +key\.confirm_happened`, out)
		})
	}
}
