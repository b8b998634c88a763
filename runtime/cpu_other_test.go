//go:build !unix

package runtime_test

import "time"

// processCPU reports that the process's CPU time is not read on this
// platform.
func processCPU() (time.Duration, bool) { return 0, false }
