// Package projectiontest is the conformance suite for projection stores and
// runners: leases and fencing, checkpoints, catch-up and live delivery,
// failover to a standby, retries and the failure policy, reset, blue-green
// versions, filters, dead letters, and read models (one RowProjection
// definition runs on every store, Setup and Clear are called, a rebuild
// never counts an event twice). A backend supplies a Harness (its journal,
// its store and a small read model written in the store's transactions)
// and calls Run; every case asserts exactly-once application from the read
// model itself.
package projectiontest
