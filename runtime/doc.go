// Package runtime is Scribe's public entry point: Config, New, the Register
// functions, Execute and Shutdown. A Go service embeds one Runtime, registers
// aggregate definitions and event types, and calls Execute; the runtime routes
// each command to the single actor that owns its stream (package actors), so
// callers never write retry loops. protoactor-go types never appear here.
//
//	rt, err := runtime.New(ctx, runtime.Config{Journal: j, Snapshots: s, NodeID: "billing-1"})
//	runtime.RegisterEvent[AccountOpened](rt, "AccountOpened", 1)
//	runtime.RegisterAggregate(rt, runtime.Aggregate[Account]{Name: "account", Initial: …, Decide: …, Evolve: …})
//	res, err := runtime.ExecuteTyped[Account](ctx, rt, runtime.Target{Aggregate: "account", ID: "42"}, Deposit{100})
//	defer rt.Shutdown(ctx)
//
// # Streams, events and state
//
// An aggregate named "account" owns the streams tagged "account:<id>". Decide
// returns values of event types registered with RegisterEvent (name, schema
// version, Go type); the Codec (JSON by default) encodes them as the events'
// data. Every event carries its stream's tag, and an aggregate's events carry
// only that one: a command whose events return other tags from Tagged fails
// with ErrForeignTags (the owners of those tags would be bypassed); DCB
// commands, which reserve every tag's owner, append events with several tags.
// Stored events of older schema versions are upcast step by
// step with the functions registered by RegisterUpcaster before they are
// decoded. Snapshots (Config.Snapshots, Config.SnapshotPolicy) are stamped with
// Aggregate.SchemaVersion; a snapshot of another schema version is ignored and
// the stream replayed.
//
// Reads need no actor: Runtime.Decode, DecodeAs and Runtime.Decoding turn the
// records of any journal read (ReadStream, Read, ReadAll, Subscribe, …) into
// the registered Go values, upcast exactly as the actors see them, without a
// lease; State folds an aggregate's state (snapshot and journal) the same way,
// on any node, without the stream's actor.
//
// # Personal data and erasure
//
// RegisterEvent with WithPersonalData declares an event type's personal
// fields and their subject; with Config.KeyStore they are sealed (package
// erasure) before they reach the journal, opened on every read, and read as
// zero values once Runtime.Erase (or `scribe erase`) destroyed the subject's
// key: DecodeRecord, DecodeAsRecord and DCBEvent.Erased name them. Snapshots
// of streams holding personal data are sealed too. Every runtime follows the
// journal's erasure records and drops what it holds of an erased subject
// (cached key, actors of its streams).
//
// # Guarantees
//
//   - One writer per stream: a stream's commands are decided one at a time in
//     arrival order against its current state. Concurrent callers are grouped
//     into one journal append (group commit) and each gets its own result or
//     domain error. Execute returns only after the command's events are
//     durable. Every append is fenced by the stream's lease, so a stale
//     activation (a paused process, a cluster handover) can never write.
//   - Domain errors from Decide are returned as is (errors.Is works). A panic
//     in aggregate code fails only that command (ErrPanic, *PanicError) and
//     the stream's state is rebuilt from the journal.
//   - Context: a command whose context ends before it is decided is never
//     executed, and Execute returns ctx.Err(). When the context ends after the
//     command was decided, its append may or may not be stored and the caller
//     cannot know which: Execute returns an error matching both ctx.Err() and
//     journal.ErrOutcomeUnknown. Execute again with the same idempotency key
//     (WithIdempotencyKey) to find out: if the first attempt was stored, the
//     first result comes back with Duplicate set and nothing is appended.
//   - Idempotency keys are durable: a key's event IDs are derived from
//     (stream, key, index), so even after a restart the journal stores them
//     once and the runtime finds the first result.
//
// # Nodes, sessions and failover
//
// A Runtime opens one node session (Config.NodeID, default the host name) and
// renews it every Config.SessionTimeout/3 in one goroutine, whatever the number
// of streams. A runtime restarted with the same NodeID after a crash takes over
// its streams at once; a runtime with another NodeID waits until the crashed
// one's session expires (up to Config.OpenTimeout, then
// journal.ErrOpenTimeout). If the session is lost (expired or superseded),
// every stream actor stops, pending commands fail with
// journal.ErrSessionExpired, and a new session is opened.
//
// Idle streams passivate after Config.IdleTimeout (snapshot if due, release
// the lease). Shutdown passivates every stream, closes the node session and
// stops the actor system; it leaves no goroutine behind.
//
// # Observability
//
// Config.TracerProvider and Config.MeterProvider receive the spans and metrics
// described in package actors (scribe.stream.execute with the mailbox wait,
// scribe.stream.decide, scribe.stream.append, scribe.stream.recover;
// commands, batch sizes, journal append and read latency, appended events,
// active actors, activations, passivations, recoveries, fence rejections) and
// package tagconsistency (scribe.dcb.*). Domain rejections leave span status
// Unset; only infrastructure failures set Error. The runtime never touches
// OpenTelemetry globals.
package runtime
