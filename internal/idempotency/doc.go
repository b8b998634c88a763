// Package idempotency derives the IDs of the events an idempotent command
// appends: one scheme for aggregate commands and DCB commands alike.
//
// The index-th event of a command executed with an idempotency key gets the
// UUIDv5 of (partition, scope, key, index) in a namespace of its kind: the
// scope is the stream's tag for an aggregate command (Aggregate) and the
// command's name for a DCB command (DCB). The journal stores an event ID once,
// so a retry with the same key appends nothing and finds the first execution's
// events by the same IDs, also after a restart. The two namespaces are the
// ones earlier releases used, so events they stored are found by this build.
package idempotency
