// Package console is the operator's web console that `scribe console`
// serves: an overview of the journal (event rate, streams, projection lag,
// live from the journal's feed), streams and their chains, events by ID and by
// correlation ID, event types, leases and node sessions, projections and
// chain verification, each at a stable URL.
//
// The console answers only to the hosts it serves (the address a request
// arrived on, localhost with its port, Config.AllowedHosts) and refuses every
// other Host header with 421, so a page that rebinds its DNS name to the
// console's address reaches nothing. It is read-only unless
// Config.AllowActions is set; a state change (a projection rebuild) is then a
// POST from the console's own pages with a confirmation field and the
// per-process action token those pages carry, and cross-origin POSTs or
// POSTs without the token are refused with 403. Pages are rendered
// by html/template, so every value (event data is user input) is escaped; the
// assets are embedded in the binary and load nothing from the network. It
// never shows key material or the database password.
package console
