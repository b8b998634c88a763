// Package postgres implements journal.Journal, journal.Sessions,
// snapshots.Store, projection.Store and erasure.KeyStore on PostgreSQL with
// pgx/v5 (pgxpool). The operator's tasks (listings, inspection, retention,
// archiving, tombstones) are in postgres/pgadmin; statement tracing is in
// postgres/pgtrace. The key store (NewKeyStore, MigrateKeyStore) lives in a
// schema of its own, never the journal's, so a dump of the journal holds
// ciphertext only.
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
// An event's Position is (Commit, Seq): the appending transaction's ID and a
// number from a sequence, both drawn after the append holds its locks. A
// lower position can commit after a higher one, so catch-up reads (Read,
// ReadAll, Subscribe, Head, CountAfter) only show rows below a gate computed
// just before the read from the transactions still appending to this
// schema (read_gate.go spells out why no append can commit below it).
// ReadStream, ReadEvent and the condition check are not gated. Within a
// stream, version order equals position order.
//
// # Fencing and sessions
//
// One statement claims an append's versions, only where each touched
// stream's version is the one the append's checks saw and the lease's node,
// incarnation and epoch are the stream's current holder, whose node session
// is open and unexpired by the database clock. Failures are reported per
// stream as a *journal.SessionError or a *journal.VersionMismatchError. A
// node session is renewed by one UPDATE, whatever the number of its leases.
// Acquire waits for a lease change (a coalesced NOTIFY) or the holder's
// expiry, at most AcquirePollInterval between tries, then fails with
// ErrOpenTimeout naming the holder.
//
// # DCB conditions
//
// Appends take transaction-scoped advisory locks in key order before
// anything else (per tag exclusive; per type, partition and journal shared;
// a condition's query exclusive), so at READ COMMITTED a condition's check
// and the write are atomic without serializable retries. A condition whose
// every query item names a claimed stream unchanged since its position needs
// no query of its own (MetricImpliedConditions).
//
// # Appends
//
// Every append runs through one engine: a batch of concurrent appends
// (Config.Batching) is decided once in Go and written by one statement that
// makes the database check every version, lease and node session again; a
// batch whose stream heads the journal remembers goes out in one round trip.
// Each append's failure is reported to its own caller only; a connection
// lost during COMMIT is journal.ErrOutcomeUnknown (retry with the same event
// IDs). Event IDs are unique: an append whose IDs are all stored returns the
// stored records marked Duplicate; a partial overlap fails with
// ErrDuplicateMismatch. Each tag stream is a hash chain whose head the
// streams table keeps (TagSummary.HeadHash).
//
// # Subscriptions and failover
//
// Subscribe reads page by page (gated), then waits for a NOTIFY wake-up
// (coalesced, sent after commit, never the data) or PollInterval. With a
// multi-host URL (target_session_attrs=read-write) appends reach whichever
// host accepts writes; ServerEpoch (journal.ServerWatcher) rises when that
// server changes or a connection is lost, so the stream actors re-read their
// streams before answering from their caches.
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
