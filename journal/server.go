package journal

// ServerWatcher is implemented by journals whose storage can be replaced under
// a running process: a database server that fails over to a standby, restarts,
// or is restored from a backup. Such a store may come back holding less than
// it acknowledged (an asynchronous standby had not received the newest
// commits), so a writer that caches what it appended (the stream actor)
// re-validates its cache against the store before it answers from it again
// once the epoch has changed.
type ServerWatcher interface {
	// ServerEpoch returns a counter that never decreases and increases
	// whenever the journal may have started talking to another database
	// server, or to the same one after it lost its connections (a restart,
	// a failover behind one address, a network loss). An increase is a
	// reason to re-validate, not a proof that anything was lost. Safe for
	// concurrent use; it does no I/O.
	ServerEpoch() uint64
}
