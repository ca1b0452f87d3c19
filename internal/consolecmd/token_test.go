package consolecmd

import (
	"bytes"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/audit"
)

// TestTokenCommands: SPEC K25 — "console token create" prints the token
// once, "list" never shows it, "revoke" revokes it; create and revoke are
// audited by the token's name and ID, never its secret.
func TestTokenCommands(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "tokens.db")
	env := map[string]string{"UNSTUCK_AUDIT_KEY": testAuditKey}
	_, _, err := runConsole(t, nil, "migrate", "--db", db)
	require.NoError(t, err)

	out, _, err := runConsole(t, env, "token", "create", "--db", db, "--name", "deploy-bot", "--role", "oncall", "--expires", "720h")
	require.NoError(t, err)
	secret := regexp.MustCompile(`token \(shown once\): (unstuck_\S{43})`).FindStringSubmatch(out)
	require.NotNil(t, secret, out)

	_, errOut, err := runConsole(t, env, "token", "create", "--db", db, "--name", "x", "--role", "oncall", "--user", "ada")
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, errOut, "not both")
	_, _, err = runConsole(t, nil, "token", "create", "--db", db, "--name", "x", "--role", "oncall")
	require.ErrorContains(t, err, "UNSTUCK_AUDIT_KEY")
	_, _, err = runConsole(t, env, "token", "create", "--db", db, "--name", "deploy-bot", "--role", "oncall")
	require.ErrorContains(t, err, "exists")

	out, _, err = runConsole(t, nil, "token", "list", "--db", db)
	require.NoError(t, err)
	require.Contains(t, out, "deploy-bot")
	require.Contains(t, out, "token:deploy-bot")
	require.NotContains(t, out, secret[1])

	out, _, err = runConsole(t, env, "token", "revoke", "--db", db, "--name", "deploy-bot")
	require.NoError(t, err)
	require.Contains(t, out, "revoked token deploy-bot")
	out, _, err = runConsole(t, nil, "token", "list", "--db", db)
	require.NoError(t, err)
	require.Contains(t, out, "revoked")
	_, _, err = runConsole(t, env, "token", "revoke", "--db", db, "--name", "nope")
	require.ErrorContains(t, err, "there is no token nope")

	d, err := openDatabase(t.Context(), db)
	require.NoError(t, err)
	defer d.Close()
	var trail bytes.Buffer
	require.NoError(t, d.Trail.Export(t.Context(), audit.Filter{}, &trail, "jsonl"))
	require.Contains(t, trail.String(), `"token.create"`)
	require.Contains(t, trail.String(), `"token.revoke"`)
	require.Contains(t, trail.String(), `deploy-bot`)
	require.NotContains(t, trail.String(), secret[1])
}
