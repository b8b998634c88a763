// Package runtime is Scribe's public entry point. A service embeds one
// Runtime, registers event types and aggregates, and calls Execute: each
// command goes to the one actor owning its stream, so callers write no retry
// loops. protoactor-go types never appear here.
//
//	store, err := postgres.Open(ctx, url, postgres.Config{}) // or memory.New()
//	rt, err := runtime.New(ctx, runtime.Config{Journal: store.Journal, Snapshots: store.Snapshots, NodeID: podName})
//	runtime.MustRegisterEvent[AccountOpened](rt, "AccountOpened", 1)
//	runtime.MustRegisterAggregate(rt, runtime.Aggregate[Account]{Name: "account", Initial: …, Decide: …, Evolve: …})
//	res, err := runtime.ExecuteTyped[Account](ctx, rt, runtime.Target{Aggregate: "account", ID: "42"}, Deposit{100})
//
// Beyond aggregates: DCB commands across several tags (RegisterDCB), reads
// without an actor (Decode, State), erasure of personal data (Erase).
//
// Guarantees (in full in docs/guarantees.md):
//
//   - One writer per stream, in arrival order; concurrent callers share one
//     append (group commit), each with its own result. Execute returns once
//     the events are durable; every append is fenced by the stream's lease.
//   - A command whose context ends before it is decided is never executed;
//     after, it may or may not be stored (journal.ErrOutcomeUnknown): Execute
//     it again with the same idempotency key for the first result; a key
//     reused for another command fails (ErrIdempotencyKeyReused).
//   - Decide's domain errors are returned as is; a panic in user code fails
//     only its command (ErrPanic).
//   - One node session per Runtime (Config.NodeID); a lost session stops the
//     stream actors and opens a new one. Idle streams passivate; Shutdown
//     leaves no goroutine behind.
//   - Spans and metrics go only to Config's providers, never to the
//     OpenTelemetry globals.
package runtime
