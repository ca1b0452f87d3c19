package idemmysql_test

import (
	"testing"

	"github.com/unstuckhq/unstuck/idem/idemtest"
)

// TestAdminConformance runs idemtest.RunAdmin (SPEC K1..K11): the store
// counts exactly, so SetCaps is nil.
func TestAdminConformance(t *testing.T) {
	t.Parallel()
	idemtest.RunAdmin(t, func(t *testing.T) idemtest.AdminHarness {
		s := setup(t).store
		return idemtest.AdminHarness{Store: s, Admin: s, Seeder: s}
	})
}
