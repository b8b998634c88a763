// Package actors is Scribe's stream engine: one protoactor-go actor per tag
// stream, the single writer that holds the stream's lease and version counter,
// recovers state from a snapshot and the journal, decides commands in arrival
// order, persists them with group commit, serves DCB reservations and
// passivates when idle.
//
// Services do not use this package: they use package runtime, which builds a
// Host from runtime.Config and registered aggregates. The API here (Host,
// Command, Result, Model, Reservation, Grantor, Bounds) exists for runtime, its
// cluster mode (runtime/cluster) and the DCB executor (package tagconsistency);
// protoactor-go types never leave it. Its guarantees are runtime's, listed in
// docs/guarantees.md: one writer per stream, no reply before
// durability, every append fenced by the stream's lease, a command whose
// context ended before it was decided never executed.
//
// How the engine keeps them (sessions, activation, group commit and
// pipelining, failure isolation, backpressure and shedding, idempotency,
// reservations, store rewinds, telemetry) is written down for maintainers in
// this file, below the package clause.
package actors

// Engine notes (for maintainers; not part of the package documentation).
//
// # Host and sessions
//
// A Host runs the actors of one node. NewHost opens ONE node session
// (journal.Sessions.OpenNode with Config.NodeID and Config.SessionTimeout) and
// one goroutine renews it every SessionTimeout/3: stream leases are valid while
// the node session is, so renewal costs one call per period whatever the number
// of streams. A host opened with the NodeID of a crashed process gets a new
// incarnation and takes over that process's leases at once; other nodes wait
// for the session timeout. When renewal reports the session expired (this
// process was paused or cut off past the timeout), every actor stops and
// fails its pending work with journal.ErrSessionExpired, and the host opens a
// new incarnation: streams are acquired again and reloaded, never served from
// the old cache.
//
// Truthful answers: an actor decides, appends, grants a reservation or serves
// state only while the node session is known valid: until the time the last
// successful OpenNode or RenewNode was *sent*, plus SessionTimeout, minus
// SessionTimeout/10 (monotonic clock, so a paused process cannot look fresh).
// Past that, requests fail at once with ErrLeaseLost (retryable; nothing was
// decided) and the host renews immediately; a failed renewal is retried with
// a short back-off (at most 1 s), logging one warning per 5 s. Host.Ready
// reports the same condition for readiness probes.
//
// Twin node IDs: when renewal reports that a newer incarnation of this node ID
// superseded the session while this process lives (journal.ErrNodeSuperseded:
// two live processes share one node ID), the host stops its actors and never
// serves again (ErrLeaseLost matching journal.ErrNodeSuperseded) instead of
// re-opening the node, which would make the two processes take each other's
// leases forever. Exactly one of the two (the newer) serves.
//
// # The stream actor
//
// The first request for a stream spawns its actor (named "stream/<partition>/<tag>").
// It first reads the stream's version without a lease (Journal.TagSummary). A
// stream without events is served as a ghost: the commands sent before that
// read are decided against the model's initial state without a lease; while
// none appends, they are answered after the actor has stopped and left the
// host (ActiveActors), and nothing is written to the sessions store. The first
// decision that appends, and any Reserve, ends the ghost with the activation
// below; its decided batch is appended expecting version 0 once the lease is
// held, or decided again if the stream got events meanwhile.
// Activation: acquire the stream's lease (waiting up to Config.OpenTimeout for
// another live node; then queued requests fail with journal.ErrOpenTimeout and
// the actor stops), load the newest snapshot whose schema version matches the
// model's (older or other-schema snapshots are skipped: never a wrong state),
// replay the tail with ReadStream, serve. At most Config.RecoveryConcurrency
// actors of a host load and replay at once. Requests that arrive meanwhile
// queue in arrival order.
//
// Group commit: the actor never blocks its mailbox on I/O. Journal calls run on
// goroutines whose completion returns to the actor as a message. The actor
// decides commands (up to Config.MaxBatch per batch) in order against the
// confirmed state plus the batch's earlier events, appends all their events in
// ONE journal.Append with Expect{tag: version} and the lease, and replies to
// each caller with its own records or its own domain error. No reply precedes
// durability. Pipelining: while an append is in flight, the commands that
// arrive are decided at once on top of the state that append leads to, and
// appended together right after it is confirmed; one append per stream is in
// flight at a time, replies stay in order, and if the append fails, those
// commands go back to the queue undecided and are decided again on the state
// the actor recovers (pipeline.go).
//
// Failures stay with their cause. Each command's events are validated alone
// against the journal's limits (journal.PrepareAppend, with the journal's
// Limits when it reports them) before they join a batch: an invalid command
// (over-long correlation ID, bad UTF-8, ...) fails by itself with
// journal.ErrInvalidEvent. If an append still fails for a reason one command
// can cause (not a fencing, version, condition, availability, unknown-outcome
// or context error), the batch's commands go back to the head of the queue
// undecided and are appended again in halves until the offender fails alone.
// A version mismatch (something appended behind the actor) wrote nothing: the
// actor re-reads its tail and decides the commands again (at most twice more
// each). An append cut off by its deadline or connection fails its commands
// with journal.ErrOutcomeUnknown, never a guessed conflict, and the actor
// re-reads its tail. After a fencing error for its own lease alone (revoked by
// a partition move, the stream taken over) it acquires the stream again and
// decides the batch anew; when the node session is lost, or a second
// revocation comes before it wrote again, it stops and fails pending work with
// journal.ErrSessionExpired. The confirmed state moves only on a durable append.
//
// Backpressure: Config.MaxQueue bounds the requests waiting at one stream and
// Config.MaxPending those of the whole host; past either, Execute and Reserve
// fail at once with ErrOverloaded and queue nothing. Commands whose caller left
// (context done) are dropped before they are decided. A command whose deadline
// leaves less time than the stream's recent appends take (fitted per stream as
// base + per-event cost, times 1.25) is answered ErrOverloaded without being
// decided, and a batch stops growing before it would outlast the tightest
// deadline among its commands: under overload the actor spends its appends on
// callers who will still be there to hear the answer. Callers who send no
// deadline are protected by queue-delay shedding (CoDel): when a stream's
// batches kept commands waiting longer than Config.QueueDelayTarget for a
// whole Config.QueueDelayInterval, new commands beyond a cap of waiting ones
// are refused at once with ErrOverloaded, undecided, until the waits are
// short and nothing was refused for an interval.
//
// Context: a command whose context ends before it is decided is never executed
// (Execute returns ctx.Err()). If the context ends after the command was
// decided, the caller cannot know whether the append is stored: Execute returns
// an error matching ctx.Err() and journal.ErrOutcomeUnknown. Execute again with
// the same idempotency key to find out.
//
// Idempotency: a command with Metadata.IdempotencyKey gets event IDs derived
// from (stream, key, index) with UUIDv5, so its events are stored at most once,
// even across restarts (the journal's idempotent append). Before deciding a
// keyed command the actor checks the keys it has seen and, for keys it may not
// have seen, the journal (ReadEvent of the derived first ID); a repeat returns
// the first result with Duplicate set. Commands that failed or produced no
// events leave no trace and run again on repeat.
//
// Panics in user code (Decide, Evolve, codecs) are recovered: only the command
// concerned fails, with a *usercode.PanicError (runtime.PanicError) carrying the panic value; the actor
// rebuilds its state from the snapshot and journal before serving the others.
//
// Passivation: after Config.IdleTimeout without messages the actor saves a
// snapshot if the policy says so, releases its lease and stops. Snapshots are
// also saved every SnapshotPolicy.Every events, off the command path.
//
// States: an actor is in one named state at a time (activating, ghost, ready,
// looking up, appending, reserved; stale, fenced or broken while it owes a
// catch-up, a new lease or a full recovery; catching up, failed, passivating,
// stopped) and moves only as one table allows. A lease found invalid on any
// path (its own append, a DCB command's append, the node session) is dropped
// there: nothing is decided, appended or granted before the stream is
// acquired again.
//
// # DCB reservations
//
// Host implements tagconsistency.TagOwners, the DCB executor's contract:
// Host.Reserve asks a stream's actor for a tagconsistency.Reservation: it is granted after the
// requests queued before it and hands out the actor's lease, version, last
// position and state. While it is held, the actor queues its own commands and
// further reservations (contenders wait, they do not fail). The holder appends
// with the lease and the expected version, then calls Confirm with the stored
// records (the actor evolves its state with those carrying its tag) or Cancel.
// The grant is a tagconsistency.PostingGrantor: the executor posts the
// confirmation (PostConfirm) and does not wait for the actor's answer.
// Reserve fails with a *tagconsistency.ReservationTimeoutError naming the tag after
// Config.ReservationTimeout; a reservation held longer than
// Config.ReservationHold is cancelled by the actor, which re-reads its tail.
//
// # A store that went back in time
//
// A database that fails over to an asynchronous standby, or is restored from a
// backup, may hold less than the actors acknowledged. Whenever Host.StoreEpoch
// moves (the journal's journal.ServerWatcher epoch, or a rewind found on any
// stream), each actor re-reads its stream before it decides, grants a
// reservation or answers from its cache; a stream found behind its cache (or
// with another chain head) drops its state and idempotency keys, reloads, and
// decides its waiting commands again. A stream whose actor had stopped is
// compared on its next activation with what that actor knew. Each loss is
// logged once as an ERROR with the lost versions and both chain heads, counted
// (scribe.store.rewound_streams, scribe.store.lost_versions), summarised by Host.Rewinds and
// passed to Config.OnStoreRewound (rewind.go).
//
// # Observability
//
// Spans: scribe.stream.execute (with the mailbox wait), scribe.stream.decide
// (child of execute), scribe.stream.append (child of the batch's first
// execute, linked to the others), scribe.stream.recover (child of the
// request that spawned the actor), scribe.stream.reserve. A command its
// aggregate rejects (a domain error from Decide) leaves its spans' status
// Unset, with scribe.rejected=true and a scribe.rejection event; only
// infrastructure failures (journal errors, panics, timeouts) set status
// Error, with error.type. Metrics: scribe.commands (by outcome),
// scribe.batch.size, scribe.journal.append.duration (error.type on
// failures), scribe.journal.append.events, scribe.journal.read.duration
// (recovery replays; DCB folds record it too), scribe.actors.active,
// scribe.actors.activations, scribe.actors.passivations,
// scribe.actors.recoveries, scribe.fence.rejections.
