// Package runtime is Scribe's public entry point: Config, New, the Register
// functions, Execute and Shutdown. A Go service embeds one Runtime, registers
// event types and aggregates, and calls Execute; the runtime routes each
// command to the single actor that owns its stream, so callers never write
// retry loops. protoactor-go types never appear here.
//
//	store, err := postgres.Open(ctx, url)          // or memory.New()
//	rt, err := runtime.New(ctx, runtime.Config{Journal: store.Journal, Snapshots: store.Snapshots, NodeID: podName})
//	runtime.MustRegisterEvent[AccountOpened](rt, "AccountOpened", 1)
//	runtime.MustRegisterAggregate(rt, runtime.Aggregate[Account]{Name: "account", Initial: …, Decide: …, Evolve: …})
//	res, err := runtime.ExecuteTyped[Account](ctx, rt, runtime.Target{Aggregate: "account", ID: "42"}, Deposit{100})
//
// An aggregate named "account" owns the streams tagged "account:<id>"; its
// events carry only that tag (ErrForeignTags otherwise). A DCB command
// (RegisterDCB) reserves every tag it reads from the tags' owners and appends
// events with several tags; with Uses it decides from the aggregates' own
// states. Events are encoded by the Codec (JSON by default), upcast by
// RegisterUpcaster, and sealed per subject when RegisterEvent declares
// personal data (WithPersonalData, Config.KeyStore, Runtime.Erase). Reads need
// no actor: Decode, DecodeAs and Decoding turn journal records into the
// registered values; State folds an aggregate's state on any node.
//
// Guarantees (the README's "Guarantees" section has them in full):
//
//   - One writer per stream, in arrival order; concurrent callers share one
//     append (group commit) and each gets its own result. Execute returns
//     only after the command's events are durable, and every append is fenced
//     by the stream's lease.
//   - A command whose context ends before it is decided is never executed;
//     one that ends after may or may not be stored (journal.ErrOutcomeUnknown):
//     Execute again with the same idempotency key (WithIdempotencyKey) to get
//     the first result (Duplicate). A key reused for another command fails
//     with ErrIdempotencyKeyReused, for aggregate and DCB commands alike.
//   - Domain errors from Decide are returned as is; a panic in user code fails
//     only its command (ErrPanic).
//   - One node session per Runtime (Config.NodeID); a lost session stops the
//     stream actors and opens a new one. Idle streams passivate; Shutdown
//     leaves no goroutine behind.
//   - Spans and metrics go to Config.TracerProvider and Config.MeterProvider
//     only: the runtime never touches OpenTelemetry globals.
package runtime
