package store

import (
	"strconv"
	"strings"
	"time"
)

// Page sizes of ListOperations and ReviewRequired.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

func clampLimit(n int) int {
	if n <= 0 {
		return DefaultLimit
	}
	return min(n, MaxLimit)
}

// where builds the WHERE clause of a list, for either dialect: the only
// dynamic SQL of the package. Column names are fixed; every value is a
// bound argument.
type where struct {
	conds []string
	args  []any
	// placeholder returns the SQL of the n-th argument (from 1).
	placeholder func(n int) string
	// timeArg encodes a time the way the dialect stores it.
	timeArg func(time.Time) any
	// now returns the SQL of the clock that judges leases, binding it as an
	// argument if need be.
	now func(w *where) string
}

func (w *where) arg(v any) string {
	w.args = append(w.args, v)
	return w.placeholder(len(w.args))
}

func (w *where) add(cond string) { w.conds = append(w.conds, cond) }

// sql returns the clause, "" when there is no condition.
func (w *where) sql() string {
	if len(w.conds) == 0 {
		return ""
	}
	return "WHERE " + strings.Join(w.conds, "\n  AND ")
}

func dollar(n int) string   { return "$" + strconv.Itoa(n) }
func question(n int) string { return "?" + strconv.Itoa(n) }
