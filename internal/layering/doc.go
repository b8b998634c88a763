// Package layering holds a test of Scribe's package layering: nothing
// imports a package above it. From the bottom: journal (the contract and
// its in-memory backend), snapshots and erasure, tagconsistency (the DCB
// executor, which declares what it needs from a tag owner), actors (the
// stream engine, which implements it), then runtime, projection, postgres
// and the tools. internal/ packages serve the layers they sit under; the
// one exception, journal/partitioned routing snapshots too, is listed in
// the test.
package layering
