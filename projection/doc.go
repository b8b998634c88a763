// Package projection builds read models from the journal: a projection is a
// name, a version, a query (which events) and a handler of record batches.
// A Runner reads the journal's global feed from the projection's checkpoint
// (catch-up, then live through Subscribe, gap-free as the feed is), calls the
// handler in batches and stores the checkpoint through a Store.
//
// # Read models: one definition for every store
//
// A RowProjection is written once: its handler receives Rows, a read model
// of JSON documents by collection and key (Collection[V] types them), and
// Bind turns it into the Projection of any RowStore. The memory store keeps
// the rows in memory, the Postgres store in a table it manages, written in
// the transaction that moves the checkpoint. Both store a batch's writes
// with its checkpoint or not at all, and every Reset empties the rows of
// the projection version, so a rebuild (Rebuild, or `scribe projections
// rebuild`, which cannot run Go code) never counts an event twice.
//
// The design choice: a typed key-value read model rather than a common SQL
// surface, which would need an SQL engine in memory or handlers that differ
// per store. A read model that needs SQL keeps the raw path: a
// Projection[pgx.Tx] whose handler writes its own tables in the
// checkpoint's transaction, with Setup (create the tables) and Clear (empty
// them; Rebuild runs it in the reset's transaction).
//
// # Delivery
//
// With the Postgres store (postgres.ProjectionStore) the handler receives the
// pgx.Tx that also moves the checkpoint: a read model in the same database
// sees every selected event exactly once, across crashes, restarts and
// failovers. The memory store stores a batch's Rows with its checkpoint or
// not at all. Effects outside the store (calls to other services, messages,
// a map of the handler's own) are at-least-once: a batch whose checkpoint
// did not commit is delivered again, so make them idempotent with the
// record's event ID.
//
// # Slices, leases and runners
//
// A store keeps a projection as slices (Layout), each with its checkpoint
// and a lease that lets one runner apply it; every commit is fenced by the
// lease's epoch and expiry, checked by the store under a lock held while the
// batch is applied, so a paused or partitioned runner that lost its lease
// applies nothing. An unsliced projection is one slice: one runner applies
// batches while the others stand by, and a standby takes over within about
// Options.LeaseTTL after the active runner died, at once after it stopped.
//
// A projection with a Slicing runs on N runners at once: its events are cut
// into Slicing.Count slices by a tag of its key group (see Slicing), and
// the live runners share the slices in contiguous ranges (Slicing.Share)
// that move when runners join, leave or die. Per slice, events arrive in
// position order, and every guarantee of this package holds. A sliced
// version becomes active when every slice has caught up. Slicing is part
// of a version: a different group or count is a new version.
//
// A journal spread over several databases (a PartitionedSource) has no
// global feed: its projections' slices are its partitions (with Slicing,
// partition × tag slice), each read on the database serving it, in the
// partition's order, and found again by event ID after the partition moved
// (pgadmin.MovePartition). With the Postgres store each event of each
// partition is applied exactly once into the read model, in the
// partition's order, across moves, crashes and restarts; events of
// different partitions have no order between them (Batch.Slices says each
// record's slice, Record.Partition its partition). A projection version
// that ran over one database cannot become one across several: give it a
// new version.
//
// # Failures
//
// A handler error rolls the batch back. The runner retries the batch record
// by record, to pin the failure to one record, with exponential backoff; after
// Options.MaxAttempts tries of one record the projection stops: Run returns a
// *FailedError, the store records State failed with the record's position
// and the error (Store.Status), the scribe.projection.failures counter grows
// and the error is logged. Nothing is ever skipped. Starting a runner again
// retries the record. Store and journal outages are retried without limit.
//
// # Rebuilds
//
// Blue-green: deploy version N+1 beside version N. It starts at position zero
// with its own checkpoint (and should write its own tables); when it has
// caught up it becomes the active version (Status.Active) and the runners of
// older versions stop with ErrSuperseded. In place: Rebuild moves the
// checkpoint back to zero, empties the read model in the same transaction
// (the rows, and the projection's Clear) and fences the current runner,
// which claims again and replays everything.
//
// # Publishing and dead letters
//
// NewPublisher delivers each event to a Sink after it is persisted (the
// journal is the outbox), in order, at least once, with retries and dead
// letters. WebhookSink and ChannelSink are here; the NATS JetStream sink is
// package projection/natssink. A dead letter is an event a publisher gave up
// on (or a handler set aside with Store.DeadLetter); ReplayDeadLetters
// re-applies them, each in a transaction that removes it when the replay
// succeeds. A process that cannot run the projection's code (the scribe
// command) asks the runner holding the lease to replay instead
// (DeadLetterReplayer.RequestReplay, Projection.Replay).
package projection
