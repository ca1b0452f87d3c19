// Package idemtest is the conformance suite every idem.Store passes.
package idemtest

import (
	"testing"

	"github.com/unstuckhq/unstuck/idem"
)

// Run runs the conformance suite against stores made by newStore. Each call
// of newStore must return a store over fresh, empty, migrated tables.
func Run(t *testing.T, newStore func(t *testing.T) idem.Store) {
	t.Helper()
	_ = newStore
}
