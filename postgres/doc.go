// Package postgres implements journal.Journal, journal.Sessions,
// snapshots.Store and erasure.KeyStore on PostgreSQL with pgx/v5 (pgxpool).
//
// The key store (NewKeyStore, MigrateKeyStore) lives in a schema of its own
// (KeyStoreConfig.Schema, default "scribe_keys", embedded
// keystore_migrations/NNNN_*.sql applied by the same engine as Migrate):
// never in the journal's schema, so a dump or backup of the journal holds
// ciphertext only. See KeyStore for what its own backups mean.
//
// # Use
//
// Open does it all: connect (traced), migrate (or only verify), and the
// journal, snapshot and projection stores on one pool, with one Close:
//
//	store, err := postgres.Open(ctx, url, postgres.Config{Schema: "shop"})
//	if err != nil { ... } // journal.ErrConfiguration says what to fix
//	defer store.Close()
//
// Or step by step, on a pool of your own:
//
//	pool, _ := pgxpool.New(ctx, url)
//	cfg := postgres.Config{Schema: "scribe"}
//	if err := postgres.Migrate(ctx, pool, cfg); err != nil { ... } // explicit, idempotent
//	j, _ := postgres.NewJournal(pool, cfg)       // no I/O
//	defer j.Close()                               // stops batch workers and LISTEN
//	store, _ := postgres.NewSnapshotStore(pool, cfg)
//
// One Config configures everything, Open and the constructors alike (the
// house rule: a Config struct, each field documented with its default,
// validated where it is used); the fields only Open uses (MaxConns,
// TracerProvider, VerifyOnly, KeyStore, KeyStoreURL) say so. There are no
// functional options.
//
// Constructors never touch the database; calls on a schema that was not
// migrated fail with journal.ErrStoreNotOpen saying to run Migrate. Migrate
// applies the embedded migrations/NNNN_*.sql files newer than the version
// recorded in the schema's schema_migrations table, in one transaction under an
// advisory lock keyed by the schema, so concurrent migrators are safe.
//
// # Positions and gap-free reads
//
// An event's Position is (Commit, Seq) = (the appending transaction's ID from
// pg_current_xact_id(), a number from the events_seq sequence), both drawn
// after the append holds its locks. Transaction IDs are assigned before
// commit, so a lower position can commit after a higher one. Catch-up reads (Read, ReadAll, Subscribe, Head,
// CountAfter) therefore only show rows below a gate computed just before the
// read: the least of the snapshot's xmax and the transaction IDs of the
// sessions holding ROW EXCLUSIVE on this schema's events table. Every append
// takes that table lock before it gets a transaction ID and holds it until its
// commit ends, so any append that could still commit below the gate is seen
// and holds the gate down (the argument is spelled out at gateSetSQL; the
// 32-bit transaction IDs pg_locks shows are widened to 64 bits with the
// snapshot's epoch, so the gate stays right after 2^32 transactions). Unlike
// gating at pg_snapshot_xmin, long transactions elsewhere in the cluster do not
// stall the feed. ReadStream, ReadEvent and the condition check are not gated:
// they see every committed event.
//
// Within a stream, version order equals position order: every append takes an
// exclusive transaction-scoped advisory lock per stream it touches before it
// draws its transaction ID, so it draws it only after the previous append to
// that stream committed.
//
// # Fencing
//
// One statement claims an append's versions: it raises each touched stream's
// version by its event count only where the version is the one the append's
// checks saw and the lease's node, incarnation and epoch are the stream's
// current, unreleased holder whose node session is open and unexpired by
// clock_timestamp(). Every failure is reported per stream as a
// *journal.SessionError (ErrInvalidSession / ErrSessionExpired) or a
// *journal.VersionMismatchError.
// (partition, tag, version) is the primary key of event_tags: a unique
// violation there is reported as ErrVersionMismatch.
//
// Sessions: nodes(node_id, incarnation, expires_at, closed) is renewed by one
// UPDATE per node, whatever the number of its leases; a stream lease is valid
// only while its node session is. Acquire is one conditional upsert that grants
// (a new epoch from the stream_epochs sequence) when the stream is free, released, held by a dead or superseded
// session or by the same node ID; otherwise it waits for a lease change
// (Release, CloseNode, a superseding OpenNode: one coalesced NOTIFY on the
// schema's lease channel, like the commits' one) or the holder's expiry by the
// database clock, at most AcquirePollInterval (1 s) between tries, until the
// wait ends with ErrOpenTimeout naming the holder. So streams waiting for a
// dead node's leases cost a query or two each per second, not forty.
//
// # DCB conditions at READ COMMITTED
//
// Transaction-scoped advisory locks, taken before anything else in one
// statement, in ascending key order (no deadlocks): every append takes an
// EXCLUSIVE lock per tag it touches and SHARED locks on each of its event
// types, its partition and the whole journal. An append with a condition also
// takes EXCLUSIVE locks derived from its query: per item, the first of its
// tags if it has tags (every matching event carries that tag), else each of its
// types; Query.All takes the partition's key, AllPartitions the journal's. Once
// the conditional append holds its locks, every append that could add a
// matching event has either committed (and a fresh READ COMMITTED statement
// sees it) or waits for this transaction, so the condition check and the write
// are atomic without serializable retries.
//
// A condition needs no query of its own when the database already checks
// what it asks. The write statement checks every stream an append claims
// (writes to, expects a version of, or holds the lease of) at the version and
// newest-event position the decision assumed. If every item of the
// condition's query names a tag whose claimed stream's newest event is at or
// before the condition's position, no matching event can lie after that
// position while those streams are unchanged (every matching event carries the
// tag); if one changed, the write is fenced and the batch is read and decided
// again with the condition queried. A DCB command reserves and claims every
// tag of its query and folds up to their newest positions, so its condition
// is always of this kind (Stats.ImpliedConditions counts them).
//
// # Idempotency, hash chains, summaries
//
// Event IDs are unique. An append whose IDs are all stored returns the stored
// records marked Duplicate (after checking their content is the same); a
// partial overlap fails with ErrDuplicateMismatch. Data is stored as the exact
// bytes PrepareAppend produced (bytea), metadata as JSON (without the
// partition, which has its own column and is filled in on read), RecordedAt from
// Config.Clock truncated to microseconds, and each event's links (versions,
// previous and own hashes) with it; streams keep each chain's head hash. Tag
// summaries come from the streams table (TagSummary.HeadHash is the recorded
// head, so journal.VerifyStream detects a stream whose newest events were
// deleted), type summaries from an index on type; there is no hot counter row.
//
// # Operations
//
// MigrationStatus reports a schema's migrations. The operator's tasks that no
// contract asks for (stream listings, leases, nodes, inspection, retention
// and archiving, tombstones) are in package postgres/pgadmin, on the same
// pool and Config; the scribe command line and its console are built on it.
//
// Failover (server.go): with a multi-host URL (target_session_attrs=read-write)
// pgx connects to whichever host accepts writes. Journal.Server names the
// server the appends reach (ServerAddress the one a pool reaches now), and
// Journal.ServerEpoch (journal.ServerWatcher) rises when that address changes
// or a connection is lost, so the stream actors re-read their streams before
// answering from their caches: a promoted asynchronous standby may hold less
// than was acknowledged. Config.Logger gets one line per change of server.
//
// # Subscriptions
//
// Subscribe reads page by page (gated), then waits for a wake-up. After
// appends commit, a notifier goroutine wakes this journal's subscribers and
// sends one pg_notify, at most every 5ms (coalesced), in its own transaction
// with synchronous_commit off: NOTIFY inside the append would serialize
// commits through Postgres's notify lock and defeat group commit. One LISTEN
// connection per Journal fans notifications from other processes out to all
// subscribers. A lost notification costs at most PollInterval; the
// notifications are only wake-ups, never the data.
//
// # Appends and batching
//
// Every append runs through one engine (engine.go). A batch is decided once,
// in Go, and written by one statement that makes the database check every
// stream's version, lease holder, epoch, release flag and node session (by the
// database clock) again under the batch's advisory locks, aborting via
// fence_check when any differs. When the journal remembers the heads (version
// and hash) of every stream a batch touches from its own earlier appends — the
// common case for a stream's single writer — the batch goes out in one round
// trip: BEGIN, the locks, LOCK events, each condition as an assertion, the
// write statement and COMMIT in one pipeline. Otherwise, or when that
// transaction's fence fails, the batch takes two: BEGIN, the locks and a read
// of the touched streams, lease nodes, stored event IDs and conditions; then
// the write statement and COMMIT. A fence that still fails (a node session
// expired between the read and the write) makes the batch read and decide
// again, so each append gets its own precise error.
//
// With Batching on (the default), concurrent Appends are queued; each of
// Batching.Workers workers (default 2) takes up to MaxBatch of them into one
// such transaction, waiting up to Batching.Linger (default 500µs) for the batch
// to grow only while its previous batch carried several appends. The appends
// are decided in order as if they ran one after the other (an earlier append's
// events count against a later append's expected versions and condition), and
// each failure is reported to its own caller only.
// A failed COMMIT
// fails every member; a connection lost during COMMIT is reported as
// journal.ErrOutcomeUnknown (retry with the same event IDs). Before a batch is
// sent, its pooled connection is checked for a server end that closed or
// reset it while it sat idle (a restarted database, a dropped proxy
// connection): such a connection is discarded for another, so it cannot make
// an outcome unknown (Stats.Discarded). The check is one non-blocking peek at
// the socket on Linux, macOS and the BSDs, and none elsewhere; a connection
// that breaks after the check still reports journal.ErrOutcomeUnknown.
//
// # Archives
//
// Archived events (pgadmin's Archive moves them) are out of the hot tables.
// ReadStream fails with *journal.ArchivedError below a stream's cut (one
// extra primary-key read of the streams row, only when the first page does
// not start at the version asked for); ReadStreamWithArchive
// (journal.ArchiveReader) reads through it. Read, ReadAll, Subscribe,
// ReadTypes and TypeSummaries see hot events only; ReadEvent and the
// append's duplicate check see archived events too (an archived event's ID
// stays taken). The write statement never claims a retired stream's row, and
// decide reports *journal.StreamRetiredError.
//
// # Tests
//
// Tests use internal/pgtest: SCRIBE_TEST_DATABASE_URL, a fresh schema per
// test, a loud skip without a database unless SCRIBE_REQUIRE_POSTGRES=1.
package postgres
