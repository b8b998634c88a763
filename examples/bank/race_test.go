//go:build race

package main

// raceEnabled reports whether the tests run with the race detector; the
// crash test then builds the binary with -race too, which reuses the
// packages the test build already compiled.
const raceEnabled = true
