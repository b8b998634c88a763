// Package actors implements the stream actor on protoactor-go: the single writer
// of one tag stream. It holds the stream's lease and version counter, recovers
// state from a snapshot and the journal, decides commands in arrival order,
// persists them with group commit, serves DCB reservations, and passivates when
// idle. protoactor-go types never leave this package and package runtime.
package actors
