//go:build !oidcdemo

package consolecmd

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDemoSSONotBuilt: a console built without the oidcdemo tag refuses
// --oidc-demo, saying how to run it.
func TestDemoSSONotBuilt(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "sso.db")
	err := run(t.Context(), []string{"demo", "--oidc-demo", "--addr", "127.0.0.1:0", "--db", db, "--traffic=false"}, func(string) string { return "" }, io.Discard, io.Discard)
	require.ErrorIs(t, err, errNoOIDCDemo)
	require.ErrorContains(t, err, "go run -tags oidcdemo ./cmd/console demo --oidc-demo")
}
