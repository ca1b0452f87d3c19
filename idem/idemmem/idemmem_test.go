package idemmem_test

import (
	"testing"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemmem"
	"github.com/unstuckhq/unstuck/idem/idemtest"
)

// TestConformance: the in-memory store, which implements only the
// required contract, passes the suite every store passes.
func TestConformance(t *testing.T) {
	idemtest.Run(t, func(*testing.T) idemdriver.Store { return idemmem.New() })
}

// TestImplementsOnlyTheRequiredContract: the store that proves the
// required contract is enough implements no optional capability.
func TestImplementsOnlyTheRequiredContract(t *testing.T) {
	var s any = idemmem.New()
	for name, ok := range map[string]bool{
		"TxStore":    is[idemdriver.TxStore](s),
		"LocalStore": is[idemdriver.LocalStore](s),
		"Admin":      is[idemdriver.Admin](s),
		"Seeder":     is[idemdriver.Seeder](s),
	} {
		if ok {
			t.Errorf("idemmem.Store implements idemdriver.%s", name)
		}
	}
}

func is[T any](v any) bool { _, ok := v.(T); return ok }
