// Package twoprocess tests the documented deployment as production runs
// it: an application with its own River workers and "console serve" beside
// it, two processes built from this module, one killed with SIGKILL.
package twoprocess

import (
	"testing"

	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m) }
