package unstuck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// specFile is the specification every SPEC citation in the code resolves
// to. Its header says what defines an ID; the parser below is that rule.
const specFile = "docs/spec.md"

// spec is what docs/spec.md defines: requirement IDs ("K21") with the
// area of their section ("CON"), groups ("IDEM-H") and section numbers
// ("1.3").
type spec struct {
	ids      map[string]string // ID → area: IDEM, SAGA or CON
	groups   map[string]bool
	sections map[string]bool
}

var (
	// specDefRe is a definition: a list item that starts with the bold ID.
	specDefRe = regexp.MustCompile(`^- \*\*([A-Z][0-9]+)\*\* `)
	// specHeadingRe is a heading: its number, if any, and its text.
	specHeadingRe = regexp.MustCompile(`^(#+) +(?:([0-9]+(?:\.[0-9]+)*)\.? )?(.*)$`)
	// specAreaRe is an area or group in a heading's parentheses.
	specAreaRe = regexp.MustCompile(`\(((IDEM|SAGA|CON)(?:-([A-Z]))?)\)`)
)

func readSpec(t *testing.T) spec {
	t.Helper()
	b, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatalf("read the specification: %v", err)
	}
	s := spec{ids: map[string]string{}, groups: map[string]bool{}, sections: map[string]bool{}}
	area, fenced := "", false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced // the example in the header defines nothing
			continue
		}
		if fenced {
			continue
		}
		if m := specHeadingRe.FindStringSubmatch(line); m != nil {
			if m[2] != "" {
				s.sections[m[2]] = true
			}
			if a := specAreaRe.FindStringSubmatch(m[3]); a != nil {
				if a[3] != "" {
					s.groups[a[1]] = true
				}
				if len(m[1]) == 2 { // a top-level section sets the area
					area = a[2]
				}
			} else if len(m[1]) == 2 {
				area = ""
			}
			continue
		}
		if m := specDefRe.FindStringSubmatch(line); m != nil {
			if _, dup := s.ids[m[1]]; dup {
				t.Errorf("%s:%d: %s is defined twice", specFile, i+1, m[1])
			}
			if area == "" {
				t.Errorf("%s:%d: %s is defined outside an area's section", specFile, i+1, m[1])
			}
			s.ids[m[1]] = area
		}
	}
	if len(s.ids) == 0 {
		t.Fatalf("%s defines no ID", specFile)
	}
	return s
}

// goFiles returns every .go file of the repository, slash-separated and
// relative to its root, outside hidden directories.
func goFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			files = append(files, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A citation is the word SPEC, then items separated by a comma, a
// semicolon or "and"; an item is an ID (with an optional area prefix), a
// range of IDs, a group or a section. The first word that is not an item
// ends it.
var (
	specWordRe    = regexp.MustCompile(`\bSPEC\b`)
	specIDPart    = `(?:(IDEM|SAGA|CON)[- ])?([A-Z])([0-9]+)`
	specItemRe    = regexp.MustCompile(`^(?:` + specIDPart + `(?:(?:–|-|\.\.)` + specIDPart + `)?\b|(§)([0-9]+(?:\.[0-9]+)*)|((?:IDEM|SAGA|CON)-[A-Z])\b)`)
	specSepRe     = regexp.MustCompile(`^(?:\s*[,;]\s*|\s+and\s+)`)
	specCommentRe = regexp.MustCompile(`^\s*//\s?`)
)

// citedIDs parses the citation that starts text and returns the IDs,
// groups and sections it names, each as it must appear in the spec, or a
// description of what is wrong with it.
func citedIDs(text string, s spec) (cited []string, problems []string) {
	text = strings.TrimLeft(text, " \t")
	for first := true; ; first = false {
		m := specItemRe.FindStringSubmatch(text)
		if m == nil {
			if first {
				problems = append(problems, fmt.Sprintf("SPEC without an ID: %q", text))
			}
			return cited, problems
		}
		text = text[len(m[0]):]
		switch {
		case m[7] == "§":
			cited = append(cited, "§"+m[8])
			if !s.sections[m[8]] {
				problems = append(problems, "section §"+m[8]+" has no heading")
			}
		case m[9] != "":
			cited = append(cited, m[9])
			if !s.groups[m[9]] {
				problems = append(problems, "group "+m[9]+" has no heading")
			}
		default:
			lo, _ := strconv.Atoi(m[3])
			hi := lo
			if m[5] != "" {
				if m[5] != m[2] || (m[4] != "" && m[4] != m[1]) {
					problems = append(problems, fmt.Sprintf("range %q spans two areas", m[0]))
					break
				}
				hi, _ = strconv.Atoi(m[6])
				if hi < lo {
					problems = append(problems, fmt.Sprintf("range %q runs backwards", m[0]))
					break
				}
			}
			for n := lo; n <= hi; n++ {
				id := m[2] + strconv.Itoa(n)
				cited = append(cited, id)
				area, ok := s.ids[id]
				switch {
				case !ok:
					problems = append(problems, id+" is not defined")
				case m[1] != "" && m[1] != area:
					problems = append(problems, fmt.Sprintf("%s is cited as %s-%s but belongs to %s", id, m[1], id, area))
				}
			}
		}
		sep := specSepRe.FindString(text)
		if sep == "" {
			return cited, problems
		}
		text = text[len(sep):]
	}
}

// TestSpecCitationsAreDefined fails, naming file:line, on a SPEC citation
// in any .go file that docs/spec.md does not define.
func TestSpecCitationsAreDefined(t *testing.T) {
	s := readSpec(t)
	cited := map[string]bool{}
	n := 0
	for _, path := range goFiles(t) {
		if path == "spec_test.go" { // this file names the word, not a citation
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i, line := range lines {
			for _, loc := range specWordRe.FindAllStringIndex(line, -1) {
				text := line[loc[1]:]
				// A citation may wrap: after SPEC or a separator at the end of
				// a comment line, it goes on on the next one.
				trimmed := strings.TrimSpace(text)
				if (trimmed == "" || strings.HasSuffix(trimmed, ",") || strings.HasSuffix(trimmed, " and")) &&
					i+1 < len(lines) && specCommentRe.MatchString(lines[i+1]) {
					text = trimmed + " " + specCommentRe.ReplaceAllString(lines[i+1], "")
				}
				ids, problems := citedIDs(text, s)
				for _, p := range problems {
					t.Errorf("%s:%d: %s", path, i+1, p)
				}
				for _, id := range ids {
					cited[id] = true
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no SPEC citation found: is the test running at the module root?")
	}
	t.Logf("%d citations of %d distinct IDs, groups and sections; %d IDs defined", n, len(cited), len(s.ids))
}

// TestCitationParser pins the citation forms the code uses.
func TestCitationParser(t *testing.T) {
	s := spec{
		ids:      map[string]string{"K5": "CON", "K6": "CON", "K22": "CON", "K23": "CON", "H2": "IDEM", "H3": "IDEM", "H4": "IDEM", "H17": "IDEM", "R6": "IDEM", "G1": "SAGA", "G2": "SAGA"},
		groups:   map[string]bool{"IDEM-H": true},
		sections: map[string]bool{"1.3": true, "2": true},
	}
	for text, want := range map[string]string{
		"K5, K6).":                   "K5 K6",
		"CON K5; and so on":          "K5",
		"CON-K6) and":                "K6",
		"IDEM-H17 and R6: text":      "H17 R6",
		"K22–K23):":                  "K22 K23",
		"H2-H4, H17.":                "H2 H3 H4 H17",
		"IDEM-H2..H4":                "H2 H3 H4",
		"IDEM-H) black-box":          "IDEM-H",
		"§1.3 and per row":           "§1.3",
		"§2, G1–G2).":                "§2 G1 G2",
		"K22 item 2: a":              "K22",
		"R6, seed 000's periodic":    "R6",
		"K5 bis":                     "K5",
		"K22-style frozen sets, K23": "K22",
	} {
		got, problems := citedIDs(text, s)
		if len(problems) > 0 || strings.Join(got, " ") != want {
			t.Errorf("citedIDs(%q) = %v, %v; want %s", text, got, problems, want)
		}
	}
	for _, text := range []string{"K7)", "IDEM-K5", "CON H2", "K23–K22", "H2–K5", "§3", "IDEM-J", "the spec"} {
		if _, problems := citedIDs(text, s); len(problems) == 0 {
			t.Errorf("citedIDs(%q) found nothing wrong", text)
		}
	}
}
