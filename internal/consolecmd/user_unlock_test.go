package consolecmd

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUserUnlock: "console user unlock" clears an
// account's sign-in throttle by moving its UpdatedAt, which every console
// process compares with the failures it counted.
func TestUserUnlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := "sqlite:" + filepath.Join(t.TempDir(), "unlock.db")
	_, _, err := runConsole(t, nil, "migrate", "--db", db)
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	env := func(string) string { return "" }
	require.NoError(t, runWithStdin(ctx, []string{"user", "add", "--db", db, "--username", "ada", "--role", "oncall"}, env,
		strings.NewReader("a-long-enough-password\n"), &out, &errOut))
	d, err := openDatabase(ctx, db)
	require.NoError(t, err)
	defer d.Close()
	before, ok, err := d.Console.UserByUsername(ctx, "ada")
	require.NoError(t, err)
	require.True(t, ok)
	time.Sleep(2 * time.Millisecond)

	out.Reset()
	require.NoError(t, runWithStdin(ctx, []string{"user", "unlock", "--db", db, "--username", "ada"}, env, nil, &out, &errOut))
	require.Contains(t, out.String(), "unlocked sign-in of user ada")
	after, _, err := d.Console.UserByUsername(ctx, "ada")
	require.NoError(t, err)
	require.True(t, after.UpdatedAt.After(before.UpdatedAt))
	require.False(t, after.Disabled)

	err = runWithStdin(ctx, []string{"user", "unlock", "--db", db, "--username", "nobody"}, env, nil, &out, &errOut)
	require.ErrorContains(t, err, "unlock nobody")
}
