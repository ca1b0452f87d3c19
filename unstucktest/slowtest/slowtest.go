// Package slowtest holds the one rule of the fast inner loop: go test
// -short runs every engine, store (conformance) and handler test, and
// leaves out the slow kinds — browser (playwright), fault (a fault proxy,
// kill -9, a crashed or second process, a cluster of the test's own),
// alert-rule, upgrade, docker and scale tests, the conformance suite run
// again over a store's optional statement paths, and an end-to-end journey
// of the console's demo run again on PostgreSQL after SQLite — which run
// without -short, as CI runs them.
//
// It is test support for this repository's suites, public so that the
// library's tests, the console's and the tools share it; adopters may use
// it, with no compatibility promise before v1.
package slowtest

import "testing"

// Kind is a kind of test the fast inner loop leaves out.
type Kind string

// The kinds of test that run only without -short.
const (
	Browser   Kind = "browser (playwright and Chromium)"
	Fault     Kind = "fault (a fault proxy, kill -9, a crashed or second process, or a database cluster of its own)"
	AlertRule Kind = "alert-rule (the Prometheus rules evaluated against a running console's metrics)"
	Upgrade   Kind = "upgrade (a database of the previous release migrated)"
	Docker    Kind = "docker (the image's build)"
	Scale     Kind = "scale (seeds and measures a large database)"
	// Ways is the conformance suite run again over each optional statement
	// path of a store; the store's own conformance run is not of this kind.
	Ways Kind = "conformance over the optional statement paths"
	// Twin is an end-to-end journey of the console's demo (a whole demo
	// started, its pages and workers) run again on PostgreSQL; its SQLite
	// run stays in the fast loop, and the stores' own PostgreSQL tests are
	// not of this kind.
	Twin Kind = "end-to-end journey again on PostgreSQL (its SQLite run is not skipped)"
)

// Skip skips t under go test -short, saying what kind of test it is and
// that a run without -short (CI's) runs it; without -short it does
// nothing.
func Skip(t testing.TB, kind Kind) {
	t.Helper()
	if testing.Short() {
		t.Skipf("%s test: skipped under -short; go test without -short runs it, as CI does", kind)
	}
}
