// Package crash kills the console with SIGKILL in the middle of its work
// and checks what the next process finds: a signup saga whose step had
// applied its effect, a bulk run halfway through. Each test runs this
// test binary again as the console's process (TestSignupCrashWorker,
// TestBulkCrashWorker), so that the process killed is a real one.
package crash

import (
	"testing"

	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m) }
