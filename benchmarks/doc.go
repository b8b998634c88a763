// Command benchmarks measures Scribe's single-writer actors against the
// optimistic-concurrency (OCC) retry loop that event stores ask callers to
// write, and against the physical ceiling of the database, side by side in the
// same process, on the same journal, with the same domain logic and the same
// event sizes.
//
// Run it with
//
//	go run ./benchmarks -scenario hot -writers 1,8,64 -duration 5s -runs 3 \
//	    -db postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//
// # Scenarios
//
// -scenario takes a comma-separated list (hot,spread): the scenarios are
// measured one after another, each with its own table (and with -out, its
// own subdirectory of DIR); projection runs only alone.
//
//   - hot: every writer sends commands to one stream.
//   - spread: each writer has its own stream.
//   - skewed: writers pick one of 10,000 streams from a Zipf distribution.
//   - transfer: DCB transfers between two of 100 accounts; a transfer's
//     decision reads both accounts' events and its event carries both tags.
//   - load: the read path, with loads/s in place of commands/s: before each
//     measurement one aggregate is seeded with 1,000 deposits (unmeasured),
//     then every command loads it whole and checks that it folded 1,000
//     events. actor loads with runtime.State on a runtime without a snapshot
//     store (the fold of every actor activation); occ with the journal's
//     ReadStream and the counter's fold, without the runtime; hallgren with
//     the peer's repository Get. Other modes are skipped. See
//     scenario_load.go.
//   - projection: the read side, not a (mode, writers) table: fills the
//     journal with -events deposits, measures -runs catch-ups of a new
//     projection from position zero (checkpoint only, and a read model
//     written in the checkpoint's transaction; -projection-batch records per
//     batch), then the lag of a live read-model projection while the hot
//     actor workload (the largest -writers) writes for -duration. See
//     projection.go.
//
// # Modes
//
//   - actor: runtime.Execute; the stream's actor is the single writer and
//     batches queued commands into one append (group commit). The runtime
//     runs with its defaults and no snapshot store.
//   - occ: the naive caller's loop: read the whole stream (or, for transfers,
//     every event of both accounts), decide, append with the expected version
//     (or a DCB append condition); on conflict back off exponentially from
//     1 ms to 50 ms and retry, up to 200 attempts.
//   - occ-fast: the strongest OCC loop: no backoff, state cached between
//     commands and attempts (only the stream's tail is read), the version
//     mismatch is detected by the journal's own expected-version check.
//   - raw: multi-row INSERTs of rows the size of the events, straight through
//     pgx into a scratch table, with the same connection pool: what Postgres can
//     physically take. Postgres only.
//   - cluster-local and cluster-remote (with -cluster, or named in -mode):
//     two runtimes in this process form a cluster over loopback gRPC
//     (automanaged provider) on the same journal, and every stream the
//     scenario addresses is given an ID that member 0 hosts. cluster-local
//     calls Execute on member 0, so the command goes straight to its actor;
//     cluster-remote calls Execute on member 1, so every command (for
//     transfers: every tag reservation) crosses to member 0 as a protobuf
//     envelope and its reply comes back. The "actor ÷ mode" column then
//     reads as the cost of the hop. A cell fails if member 1 hosted any
//     stream.
//   - actor-personal (named in -mode): actor with erasure support: an
//     in-memory key store, and the deposited event's note declared personal
//     data of its counter (runtime.WithPersonalData, subject: the stream
//     tag's value), so every event is sealed (AES-256-GCM) before its
//     append. "-mode actor,actor-personal" measures the write path's cost of
//     erasure support; the "actor ÷ mode" column is then the speed-up of
//     going without it (1.10 is 10% overhead).
//   - actor-states (named in -mode; transfer only): the transfer as a DCB
//     command with runtime.DCB.Uses, as the bank example writes it: the
//     accounts are aggregates, each opened by one AccountOpened event before
//     the measurement, and a transfer decides from the two states their
//     stream actors hold, reading nothing. actor's transfer is the raw form:
//     it folds both accounts' events, from the executor's fold cache (kept
//     per ordered pair of accounts, 4,096 of them) or, on a miss, from the
//     journal, so its cost grows with the accounts' history.
//   - hallgren (named in -mode, needs -db): the peer library a Go team
//     would pick instead, github.com/hallgren/eventsourcing v0.7.0 on its
//     Postgres store (eventstore/sql v0.7.0) through the pgx stdlib driver,
//     with -pool connections, in a schema of its own dropped after each
//     measurement. A command is its users' loop: repository Get of a fresh
//     aggregate, the command (the same decide function), repository Save;
//     on a version conflict (the store's check, or the unique violation a
//     concurrent insert gets) reload and retry at once. Not in transfer:
//     the peer has no command over two aggregates. See mode_hallgren.go.
//
// Every mode runs the same pure decide function on the same state; each
// command appends one event with a JSON payload of about 100 bytes.
//
// # Method
//
// For each writer count, each run measures every mode in turn (the mode order
// rotates from run to run so no mode always goes first). -duration is the
// measured time of one (mode, writer count) pair over all runs, split evenly
// across -runs; each measurement is preceded by an unmeasured warm-up
// (-warmup). With -db, every measurement gets a fresh schema, migrated before
// and dropped after, and every mode uses one connection pool of -pool
// connections. The table reports, per writer count and mode, the medians over
// runs and the median of the per-run ratios actor ÷ mode. On Postgres a second
// table reports what each mode sent per command (round trips, statements,
// transactions), counted by a pgx tracer on the mode's pool (see
// statements.go) from the warm-up's start to the measurement's end: warm-up
// and background work (sessions, notifications) included, setup and seeding
// not.
//
// # Output
//
// A progress line on stderr every second; the table on stdout at the end (on
// stderr with -json, which makes stdout one JSON object per run, writer count
// and mode). -out DIR writes results.csv (one row per run, writer count and
// mode) and chart.svg (median commands/s against writers, one line per mode,
// log scales). The notes under the table state the machine's load average
// before and after the run: other processes on the machine skew the numbers.
// -cpuprofile FILE writes the harness's Go CPU profile for go tool pprof.
//
// benchmarks/pgbench.sh measures Postgres's own single-row commit rate at 16
// clients for comparison, and the same with a NOTIFY in every transaction
// (which serializes commits: why the journal notifies after commit instead).
package main
