package memory_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a Journal
// starts none, and subscriptions and waiting Acquires must not leave one behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
