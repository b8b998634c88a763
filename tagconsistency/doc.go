// Package tagconsistency executes DCB commands whose query spans several tags:
// it reserves every tag's stream actor in sorted tag order, builds the state from
// the matching events, decides, appends once with per-tag expected versions,
// leases and the DCB append condition as a backstop, and confirms or cancels.
package tagconsistency
