package sso

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// roleRank orders the console's roles, least powerful first (as
// store.Roles): the highest mapped role wins.
var roleRank = []string{"auditor", "support", "oncall", "admin"}

// RoleMap maps the provider's groups to console roles. The zero value maps
// nothing: every sign-in is refused.
type RoleMap struct {
	byGroup map[string]string
}

// ParseRoleMap reads a mapping file: CSV lines "group,role", with an
// optional header line "group,role", blank lines and lines starting with
// '#' ignored. Groups are compared exactly (case matters, as providers
// keep it); a role is one of auditor, support, oncall, admin. A group may
// be listed once. An error names the line.
func ParseRoleMap(r io.Reader) (RoleMap, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	m := RoleMap{byGroup: map[string]string{}}
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return RoleMap{}, fmt.Errorf("sso: role mapping: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != 2 {
			return RoleMap{}, fmt.Errorf("sso: role mapping line %d: want \"group,role\", got %d fields", line, len(rec))
		}
		group, role := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
		if first && group == "group" && role == "role" {
			continue
		}
		switch {
		case group == "":
			return RoleMap{}, fmt.Errorf("sso: role mapping line %d: the group is empty", line)
		case !slices.Contains(roleRank, role):
			return RoleMap{}, fmt.Errorf("sso: role mapping line %d: role %q is not one of auditor, support, oncall, admin", line, role)
		case m.byGroup[group] != "":
			return RoleMap{}, fmt.Errorf("sso: role mapping line %d: group %q is mapped twice", line, group)
		}
		m.byGroup[group] = role
	}
	return m, nil
}

// Len is how many groups are mapped.
func (m RoleMap) Len() int { return len(m.byGroup) }

// Role returns the highest role that one of groups maps to; ok is false
// when none maps (no access).
func (m RoleMap) Role(groups []string) (role string, ok bool) {
	best := -1
	for _, g := range groups {
		if r, found := m.byGroup[g]; found {
			best = max(best, slices.Index(roleRank, r))
		}
	}
	if best < 0 {
		return "", false
	}
	return roleRank[best], true
}
