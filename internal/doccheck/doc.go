// Package doccheck keeps the documentation's Go snippets true: its test
// reads every ```go block of docs/*.md and fails unless the block is a
// verbatim excerpt (blank lines and runs of spaces aside) of a Go file of
// the module that the test suite compiles. A snippet is written by copying
// it from an example or a test, never typed into the page alone.
package doccheck
