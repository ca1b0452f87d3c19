package consolecmd

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A --trace-url that is not an http(s) URL template with
// {trace_id} is a usage error at start, naming the flag and the problem.
func TestServeRejectsBadTraceURL(t *testing.T) {
	t.Parallel()
	env := map[string]string{"UNSTUCK_DB": "sqlite:" + filepath.Join(t.TempDir(), "trace.db"),
		"UNSTUCK_SECRET": "serve-test-secret-0123456789abcdef", "UNSTUCK_AUDIT_KEY": testAuditKey}
	for bad, why := range map[string]string{
		"javascript:alert(1)//{trace_id}":  "http",
		"https://tempo.example.com/trace/": "{trace_id}",
	} {
		_, errOut, err := runConsole(t, env, "serve", "--addr", "127.0.0.1:0", "--trace-url", bad)
		require.ErrorIs(t, err, errUsage, bad)
		require.Contains(t, errOut, "--trace-url", bad)
		require.Contains(t, errOut, why, bad)
	}
	env["UNSTUCK_TRACE_URL"] = "ftp://example.com/{trace_id}"
	_, errOut, err := runConsole(t, env, "serve", "--addr", "127.0.0.1:0")
	require.ErrorIs(t, err, errUsage, "the environment is checked alike")
	require.Contains(t, errOut, "--trace-url")
}
