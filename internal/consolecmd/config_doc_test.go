package consolecmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// configDoc is the configuration reference that must follow --help.
const configDoc = "../../docs/configuration.md"

var (
	helpFlag    = regexp.MustCompile(`(?m)^  -([a-z0-9][a-z0-9-]*)(?: |$)`)
	docSection  = regexp.MustCompile("^## `console ([a-z ]+)`")
	docFlagRow  = regexp.MustCompile("^\\| `--([a-z0-9][a-z0-9-]*)")
	docEnvRow   = regexp.MustCompile("^\\| `(UNSTUCK_[A-Z0-9_]*[A-Z0-9])`")
	envName     = regexp.MustCompile(`UNSTUCK_[A-Z0-9_]*[A-Z0-9]`)
	subcommands = func(group string) *regexp.Regexp {
		return regexp.MustCompile(`console ` + group + ` ([a-z]+)`)
	}
)

// helpOf runs "console <args> --help" through run, with an empty
// environment, and returns what it printed on stdout.
func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	noEnv := func(string) string { return "" }
	if err := run(context.Background(), append(args, "--help"), noEnv, &stdout, &stderr); err != nil {
		t.Fatalf("console %s --help: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if stdout.Len() == 0 {
		t.Fatalf("console %s --help printed nothing on stdout", strings.Join(args, " "))
	}
	return stdout.String()
}

// consoleCommands lists every command that has flags: serve, demo,
// migrate, api, and each subcommand that "console user --help", "console
// audit --help" and "console token --help" name, so that a new one (console user password) is
// checked without editing this test.
func consoleCommands(t *testing.T) []string {
	cmds := []string{"serve", "demo", "migrate", "api"}
	for _, group := range []string{"user", "audit", "token"} {
		var subs []string
		for _, m := range subcommands(group).FindAllStringSubmatch(helpOf(t, group), -1) {
			if !slices.Contains(subs, m[1]) {
				subs = append(subs, m[1])
			}
		}
		if len(subs) == 0 {
			t.Fatalf("console %s --help names no subcommand", group)
		}
		for _, s := range subs {
			cmds = append(cmds, group+" "+s)
		}
	}
	return cmds
}

// docSections reads the configuration reference: the flags of each
// "## `console …`" section's table, and the variables of the
// "## Environment variables" table.
func docSections(t *testing.T) (flags map[string]map[string]bool, env map[string]bool, text string) {
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	flags, env = map[string]map[string]bool{}, map[string]bool{}
	section := ""
	for line := range strings.Lines(string(b)) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "## ") {
			section = ""
			if m := docSection.FindStringSubmatch(line); m != nil {
				section = strings.TrimSpace(m[1])
				if flags[section] != nil {
					t.Errorf("%s: two sections for console %s", configDoc, section)
				}
				flags[section] = map[string]bool{}
			} else if line == "## Environment variables" {
				section = "env"
			}
			continue
		}
		switch {
		case section == "env":
			if m := docEnvRow.FindStringSubmatch(line); m != nil {
				env[m[1]] = true
			}
		case section != "":
			if m := docFlagRow.FindStringSubmatch(line); m != nil {
				flags[section][m[1]] = true
			}
		}
	}
	return flags, env, string(b)
}

// sectionOf is the documented section a command's flags belong to: the
// longest section name that is the command or a leading part of it
// ("user" for "user add").
func sectionOf(sections map[string]map[string]bool, cmd string) string {
	best := ""
	for s := range sections {
		if (cmd == s || strings.HasPrefix(cmd, s+" ")) && len(s) > len(best) {
			best = s
		}
	}
	return best
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestConfigurationDocMatchesHelp: every flag that a subcommand's --help
// prints is in that subcommand's table in docs/configuration.md, and
// every flag a table lists is printed by the --help of a command it
// documents, so the reference cannot drift from the code.
func TestConfigurationDocMatchesHelp(t *testing.T) {
	documented, _, _ := docSections(t)
	printed := map[string]map[string]bool{} // section → flags of its commands
	for _, cmd := range consoleCommands(t) {
		section := sectionOf(documented, cmd)
		if section == "" {
			t.Errorf("%s has no section \"## `console %s`\" for console %s", configDoc, cmd, cmd)
			continue
		}
		if printed[section] == nil {
			printed[section] = map[string]bool{}
		}
		help := helpOf(t, strings.Fields(cmd)...)
		flags := helpFlag.FindAllStringSubmatch(help, -1)
		if len(flags) == 0 {
			t.Errorf("console %s --help prints no flag:\n%s", cmd, help)
		}
		for _, m := range flags {
			printed[section][m[1]] = true
			if !documented[section][m[1]] {
				t.Errorf("console %s --%s is printed by --help but missing from %s, section `console %s`", cmd, m[1], configDoc, section)
			}
		}
	}
	sections := map[string]bool{}
	for s := range documented {
		sections[s] = true
	}
	for _, section := range sortedKeys(sections) {
		if printed[section] == nil {
			t.Errorf("%s documents console %s, which is not a command", configDoc, section)
			continue
		}
		for _, f := range sortedKeys(documented[section]) {
			if !printed[section][f] {
				t.Errorf("%s documents --%s under console %s, which no longer has it", configDoc, f, section)
			}
		}
	}
}

// TestConfigurationDocEnvironment: the environment table of
// docs/configuration.md lists exactly the UNSTUCK_ variables the console's
// code names, and the document names no other.
func TestConfigurationDocEnvironment(t *testing.T) {
	_, documented, text := docSections(t)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	inCode := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range envName.FindAllString(string(b), -1) {
			inCode[v] = true
		}
	}
	if len(inCode) == 0 {
		t.Fatal("no UNSTUCK_ variable found in the console's code")
	}
	for _, v := range sortedKeys(inCode) {
		if !documented[v] {
			t.Errorf("%s is read by the console but missing from the environment table of %s", v, configDoc)
		}
	}
	for _, v := range sortedKeys(documented) {
		if !inCode[v] {
			t.Errorf("%s documents %s, which the console no longer reads", configDoc, v)
		}
	}
	named := map[string]bool{}
	for _, v := range envName.FindAllString(text, -1) {
		named[v] = true
	}
	for _, v := range sortedKeys(named) {
		if !inCode[v] {
			t.Errorf("%s names %s, which the console does not read", configDoc, v)
		}
	}
}
