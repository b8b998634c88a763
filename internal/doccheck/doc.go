// Package doccheck keeps the documentation true: its tests read every
// ```go block of README.md and docs/*.md and fail unless the block is a
// verbatim excerpt (blank lines and runs of spaces aside) of a Go file of
// the module that the test suite compiles, and fail on a relative link that
// names no file, or no heading of its page. A snippet is written by copying
// it from an example or a test, never typed into the page alone.
package doccheck
