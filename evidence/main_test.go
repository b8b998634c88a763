package evidence_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine (Make's and Compare's
// workers) outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
