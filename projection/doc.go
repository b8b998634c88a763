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
// surface. An Exec/Query interface would need an SQL engine in memory, or
// handlers that differ per store; put, get, delete and list by key are
// what simple read models need and both stores implement them exactly. A
// read model that needs SQL keeps the raw path: a Projection[pgx.Tx] whose
// handler writes its own tables in the checkpoint's transaction, with
// Setup (create the tables; runners run it before their first batch) and
// Clear (empty them; Rebuild runs it in the reset's transaction).
//
// # Delivery
//
// With the Postgres store (postgres.ProjectionStore) the handler receives the
// pgx.Tx that also moves the checkpoint: a read model in the same database
// sees every selected event exactly once, across crashes, restarts and
// failovers. The memory store stores a batch's Rows with its checkpoint or
// not at all. For effects outside the store (calls to other services,
// messages, a map of the handler's own on the memory store), delivery is
// at-least-once: a batch whose effects happened but whose checkpoint did
// not commit is delivered again, so make such effects idempotent with the
// record's event ID.
//
// # One runner at a time
//
// Runners of one projection may run in many processes. An unsliced
// projection is one slice of the store's protocol (see Store and Layout):
// its lease lets one runner apply batches while the others stand by. Every
// commit is fenced by the lease's epoch and expiry (checked by the store,
// under a lock held while the batch is applied), so a paused or
// partitioned runner that lost its lease applies nothing; a standby takes
// over within about Options.LeaseTTL after the active runner died, at once
// after it stopped.
//
// # Many runners at once: sliced projections
//
// A projection with a Slicing runs on N runners at once. Its events are cut
// into Slicing.Count slices by a stable hash of a tag of its key group
// (journal.SliceOf: MD5 into 1024 slices, computed identically by Go and by
// Postgres, which indexes it). An event is in the slice of each of its tags
// of the group and delivered once per slice (Batch.Slices,
// Slicing.TagsIn), so a transfer between two accounts updates each account
// once; events with no tag of the group are not delivered. Every runner
// joins the projection's live runners in the store and owns a contiguous
// range of slices (Slicing.Share), each slice with its own checkpoint and
// lease; ranges move when runners join, leave or die (a dead runner's
// slices are claimed when their leases lapse). A runner reads only its
// slices' events (journal.SliceSubscriber; Postgres filters them on an
// index), gap-free like the unsliced feed, and commits each batch under the
// leases of the slices it touches, checked by the store in the read
// model's transaction: per slice, events arrive in position order, a
// stream's events are in one slice, and every guarantee of this package
// (exactly once into a Postgres read model, catch-up then live, blue-green
// versions, dead letters, pause and rebuild) holds. A sliced version
// becomes active when every slice has caught up. Slicing is part of a
// version: a different group or count is a new version.
//
// # Across several databases
//
// A journal spread over several databases (partitioned.Router with several
// members) has no global feed: positions are ordered per database. A
// runner over such a source (a PartitionedSource) runs the projection as a
// sliced one whose slices are the source's partitions
// (Layout.Partitions): each partition is read on the database serving it,
// in the partition's own order, with a checkpoint and lease of its own,
// and several runners share the partitions as they share slices. With
// Slicing, each partition is cut into Slicing.Count slices (partition ×
// tag slice): each slice reads its partition whole and applies only the
// records with a tag of its tag slice (as a sliced projection on one
// database: a record is delivered once for each tag slice it has tags in),
// moving its checkpoint past the others; every partition of the source is
// read unless Slicing.Partition names one. Each partition is then read
// once per tag slice: Count reads of every partition, whichever runners
// hold them. A checkpoint names the database its
// position belongs to and the event ID of the record there; a partition
// move (pgadmin.MovePartition) copies events in order with their IDs and
// new positions, so the runner finds its place on the partition's new
// database by the event ID, live (the old database's subscription ends
// when the partition moved) or at its next start, also after a move there
// and back. Guarantees: with the Postgres store each event of each
// partition is applied exactly once into the read model, in the
// partition's order, across moves, crashes and restarts; batches may mix
// partitions, and events of different partitions have no order between
// them (Batch.Slices says each record's slice, Record.Partition its
// partition). The store may live in any database, one of the journal's or
// another. A projection version that ran over one database cannot become
// one across several: give it a new version.
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
// older versions stop with ErrSuperseded. Readers pick the tables (or
// rows) of the active version. In place: Rebuild moves the checkpoint back
// to zero, empties the read model in the same transaction (the rows, and
// the projection's Clear) and fences the current runner, which claims again
// and replays everything.
//
// # Publishing
//
// NewPublisher delivers each event to a Sink after it is persisted (an
// outbox without an outbox table: the journal is the outbox), in order, at
// least once, with retries and dead letters. WebhookSink and ChannelSink are
// here; the NATS JetStream sink is package projection/natssink.
//
// # Dead letters
//
// A dead letter is an event a publisher gave up on (or a handler set aside
// with Store.DeadLetter). ReplayDeadLetters re-applies them, each in a
// transaction that removes it when the replay succeeds and keeps it with
// the new error when it fails. A process that cannot run the projection's
// code (the scribe command) asks for a replay instead
// (DeadLetterReplayer.RequestReplay), and the runner holding the lease
// replays with Projection.Replay (a publisher: its sink).
package projection
