package consolecmd

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

// dockerignored reports whether the .dockerignore patterns exclude the
// slash-separated path rel. It knows the subset the file uses: a leading
// "/" or none (anchored at the root), a leading "**/" (at any depth), and
// path.Match globs; a pattern also excludes everything below a match.
func dockerignored(patterns []string, rel string) bool {
	parts := strings.Split(rel, "/")
	for _, p := range patterns {
		anyDepth := strings.HasPrefix(p, "**/")
		p = strings.TrimPrefix(strings.TrimPrefix(p, "**/"), "/")
		for start := range parts {
			if start > 0 && !anyDepth {
				break
			}
			for end := start + 1; end <= len(parts); end++ {
				if ok, _ := path.Match(p, strings.Join(parts[start:end], "/")); ok {
					return true
				}
			}
		}
	}
	return false
}

// TestDockerImage checks the Dockerfile's build context and its data
// volume by reading them, since no container engine runs the tests: the
// context leaves out .git and local databases but keeps every file the
// build compiles or embeds, and /data exists owned by the runtime user
// before it is declared a volume.
func TestDockerImage(t *testing.T) {
	slowtest.Skip(t, slowtest.Docker)
	t.Parallel()
	root := filepath.Join("..", "..")
	raw, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	require.NoError(t, err, "the build context needs a .dockerignore")
	var patterns []string
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	for _, out := range []string{".git", ".git/config", "unstuck-demo.db", "data/console.db-wal", "internal/x.sqlite", "console"} {
		require.True(t, dockerignored(patterns, out), "%s stays out of the build context", out)
	}
	needed := 0
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == ".git" || rel == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		ext := path.Ext(rel)
		if (ext == ".go" && !strings.HasSuffix(rel, "_test.go")) || ext == ".sql" || rel == "go.mod" || rel == "go.sum" ||
			strings.HasPrefix(rel, "rbac_") || strings.HasPrefix(rel, "static/") {
			needed++
			require.False(t, dockerignored(patterns, rel), "%s is needed by the build", rel)
		}
		return nil
	}))
	require.Greater(t, needed, 50)

	raw, err = os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	dockerfile := string(raw)
	copyData := strings.Index(dockerfile, "COPY --from=build --chown=65532:65532 /out/data /data")
	volume := strings.Index(dockerfile, "VOLUME /data")
	require.Positive(t, copyData, "/data is made for the runtime user")
	require.Greater(t, volume, copyData, "declared a volume after it exists with its owner")
	require.Contains(t, dockerfile, "USER nonroot:nonroot", "65532 is distroless's nonroot")
	require.Contains(t, dockerfile, "chown 65532:65532 /out/data")
}
