package unstuck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink is a Markdown inline link's target; mdHeading a heading line.
var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	mdFence   = regexp.MustCompile("(?ms)^```.*?^```")
)

// headingAnchor is the anchor a forge gives a heading: lower case, spaces
// to hyphens, other punctuation dropped.
func headingAnchor(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestMarkdownLinksResolve: every relative link of the repository's
// Markdown files names a file that exists, and an anchor into a Markdown
// file names one of its headings, so the documentation cannot point into
// nowhere after a move.
func TestMarkdownLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{}
	headings := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := map[string]bool{}
		for _, m := range mdHeading.FindAllStringSubmatch(mdFence.ReplaceAllString(string(b), ""), -1) {
			a[headingAnchor(m[1])] = true
		}
		anchors[path] = a
		return a
	}
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range mdLink.FindAllStringSubmatch(mdFence.ReplaceAllString(string(b), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), file)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: no such file %s", path, target, dest)
					continue
				}
			}
			checked++
			if anchor != "" && strings.HasSuffix(dest, ".md") && !headings(dest)[anchor] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", path, target, dest, anchor)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no relative link found: the walk is broken")
	}
}
