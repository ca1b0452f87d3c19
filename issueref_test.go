package unstuck

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// issueRefRe is a reference to an issue of the tracker by number ("issue
// N", "Issue N item M", "(issues N and M)"). A comment states the contract
// as it is now; the history of a change, and why it was made, belong in
// its commit's body and in docs/decisions.
var issueRefRe = regexp.MustCompile(`(?i)\bissues?\s+#?[0-9]+`)

// issueRefAllowedFiles lists the files whose issue references are left
// for now, each with its reason; it is empty, and meant to stay so.
var issueRefAllowedFiles = []string{}

// issueRefAllowedLines lists references in code rather than comments
// (assertion messages): a line of the file is allowed when it contains
// the text. It is empty: none is left.
var issueRefAllowedLines = map[string][]string{}

// TestNoIssueReferences fails, naming file:line, on a .go file that refers
// to an issue by number.
func TestNoIssueReferences(t *testing.T) {
	for _, path := range goFiles(t) {
		if path == "issueref_test.go" { // its regexp's comment names the forms
			continue
		}
		if slices.Contains(issueRefAllowedFiles, path) {
			if b, err := os.ReadFile(path); err == nil && !issueRefRe.Match(b) {
				t.Logf("%s has no issue reference left: remove it from issueRefAllowedFiles", path)
			}
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if !issueRefRe.MatchString(line) ||
				slices.ContainsFunc(issueRefAllowedLines[path], func(s string) bool { return strings.Contains(line, s) }) {
				continue
			}
			t.Errorf("%s:%d: refers to an issue by number; state the contract instead: %s", path, n, strings.TrimSpace(line))
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		f.Close()
	}
}

// TestIssueRefPattern pins what counts as a reference.
func TestIssueRefPattern(t *testing.T) {
	// Built from parts, so that this file holds no reference itself.
	for _, s := range []string{"(" + "issue" + " 14)", "Issue" + " 9 item 1:", "issues" + " 9 and 14", "issue" + " #12"} {
		if !issueRefRe.MatchString(s) {
			t.Errorf("%q is not taken for a reference", s)
		}
	}
	for _, s := range []string{"an issue of the tracker", "issueN", "tissue 5"} {
		if issueRefRe.MatchString(s) {
			t.Errorf("%q is taken for a reference", s)
		}
	}
}
