// Package layering holds a test of Scribe's package layering: nothing
// imports a package above it. From the bottom: journal (the contract, its
// in-memory backend and the partitioned router), snapshots and erasure
// (snapshots/routed, which routes snapshots by a partitioned router, sits
// above both), tagconsistency (the DCB executor, which declares what it
// needs from a tag owner), actors (the stream engine, which implements it),
// then runtime, projection, postgres and the tools. internal/ packages
// serve the layers they sit under.
package layering
