package partitioned_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/internal/throwawaypg"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/partitioned"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/snapshots"
	"github.com/scribe-es/scribe/snapshots/routed"
)

// database is one migrated schema on one Postgres server.
type database struct {
	url     string
	pool    *pgxpool.Pool
	cfg     postgres.Config
	journal *postgres.Journal
	snaps   *postgres.SnapshotStore
}

// openDatabase migrates a fresh schema on the server at url and opens its
// journal and snapshot store; cleanup closes them and drops the schema.
func openDatabase(t *testing.T, url string) *database {
	t.Helper()
	pool, schema := pgtest.PoolAt(t, url, nil)
	cfg := postgres.Config{Schema: schema}
	require.NoError(t, postgres.Migrate(context.Background(), pool, cfg))
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	s, err := postgres.NewSnapshotStore(pool, cfg)
	require.NoError(t, err)
	return &database{url: url, pool: pool, cfg: cfg, journal: j, snaps: s}
}

func (d *database) member(name string) partitioned.Member {
	return partitioned.Member{Name: name, Journal: d.journal}
}

// snapshotsOf routes r's snapshots to the snapshot stores of dbs (member
// name → database; every member of r).
func snapshotsOf(t *testing.T, r *partitioned.Router, dbs map[string]*database) snapshots.Store {
	t.Helper()
	stores := make(map[string]snapshots.Store, len(dbs))
	for name, d := range dbs {
		stores[name] = d.snaps
	}
	s, err := routed.New(r, stores)
	require.NoError(t, err)
	return s
}

// queryOne runs a query returning one value on d's schema (the query
// names %[1]s, or %s, for it).
func queryOne[T any](t *testing.T, d *database, query string, args ...any) T {
	t.Helper()
	var v T
	q := fmt.Sprintf(query, pgx.Identifier{d.cfg.Schema}.Sanitize())
	require.NoError(t, d.pool.QueryRow(context.Background(), q, args...).Scan(&v))
	return v
}

// count runs a count(*) query on d's schema (see queryOne).
func (d *database) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	return queryOne[int](t, d, query, args...)
}

// text runs a query returning one text value on d's schema (see queryOne).
func (d *database) text(t *testing.T, query string, args ...any) string {
	t.Helper()
	return queryOne[string](t, d, query, args...)
}

// twoDatabases opens a schema on the shared server ("one", the default
// member) and one on a throwaway second server ("two"), and a router over
// both with the given partition map.
func twoDatabases(t *testing.T, partitions map[string]string) (one, two *database, r *partitioned.Router) {
	t.Helper()
	one = openDatabase(t, pgtest.URL(t))
	two = openDatabase(t, secondServer(t))
	r, err := partitioned.New(partitioned.Config{
		Members:    []partitioned.Member{one.member("one"), two.member("two")},
		Partitions: partitions,
		Default:    "one",
	})
	require.NoError(t, err)
	return one, two, r
}

// secondServer starts a throwaway Postgres server for the test and returns
// its URL; the first server is the shared one (SCRIBE_TEST_DATABASE_URL).
func secondServer(t *testing.T) string {
	t.Helper()
	pgtest.URL(t) // skip (or fail) loudly without the shared server
	srv := throwawaypg.Start(t)
	return srv.URL()
}

type (
	deposit struct{ Amount int }
	// deposited is the account's only event.
	deposited struct {
		Amount int `json:"amount"`
	}
	balance struct {
		Total int `json:"total"`
	}
	// moveFunds is a DCB command between two accounts of one partition.
	moveFunds struct {
		Partition, From, To string
		Amount              int
	}
	fundsMoved struct {
		From   string `json:"from"`
		To     string `json:"to"`
		Amount int    `json:"amount"`
	}
)

func (e fundsMoved) Tags() []journal.Tag {
	return []journal.Tag{journal.NewTag("account", e.From), journal.NewTag("account", e.To)}
}

// accountRuntime starts a runtime on j (sessions from j) with the account
// aggregate and the moveFunds DCB command registered.
func accountRuntime(t *testing.T, ctx context.Context, j journal.Journal, snaps snapshots.Store, node string) (*runtime.Runtime, *runtime.DCBCommand[moveFunds, map[string]int]) {
	t.Helper()
	policy := snapshots.Policy{Every: 3, OnPassivation: true}
	rt, err := runtime.New(ctx, runtime.Config{Journal: j, Snapshots: snaps, SnapshotPolicy: &policy, NodeID: node})
	require.NoError(t, err)
	require.NoError(t, runtime.RegisterEvent[deposited](rt, "Deposited", 1))
	require.NoError(t, runtime.RegisterEvent[fundsMoved](rt, "FundsMoved", 1))
	require.NoError(t, runtime.RegisterAggregate(rt, runtime.Aggregate[balance]{
		Name:          "account",
		Initial:       func() balance { return balance{} },
		SchemaVersion: 1,
		Decide: func(_ balance, cmd any) ([]any, error) {
			c, ok := cmd.(deposit)
			if !ok {
				return nil, fmt.Errorf("unknown command %T", cmd)
			}
			return []any{deposited{Amount: c.Amount}}, nil
		},
		Evolve: func(s balance, ev any) balance {
			switch e := ev.(type) {
			case deposited:
				s.Total += e.Amount
			}
			return s
		},
	}))
	move, err := runtime.RegisterDCB(rt, runtime.DCB[moveFunds, map[string]int]{
		Name: "moveFunds",
		Query: func(c moveFunds) journal.Query {
			return journal.Query{Partition: c.Partition, Items: []journal.QueryItem{
				{Tags: []journal.Tag{journal.NewTag("account", c.From)}},
				{Tags: []journal.Tag{journal.NewTag("account", c.To)}},
			}}
		},
		Initial: func(moveFunds) map[string]int { return map[string]int{} },
		Evolve: func(c moveFunds, s map[string]int, ev runtime.DCBEvent) map[string]int {
			switch e := ev.Value.(type) {
			case deposited:
				for _, tag := range ev.Record.Tags {
					s[tag.Value()] += e.Amount
				}
			case fundsMoved:
				s[e.From] -= e.Amount
				s[e.To] += e.Amount
			}
			return s
		},
		Decide: func(c moveFunds, s map[string]int) ([]any, error) {
			if s[c.From] < c.Amount {
				return nil, errors.New("insufficient funds")
			}
			return []any{fundsMoved{From: c.From, To: c.To, Amount: c.Amount}}, nil
		},
	})
	require.NoError(t, err)
	return rt, move
}

// TestPartitionMoveSeveralDatabasesServeOneRuntime: a runtime on a router over
// two Postgres servers (the shared one and a throwaway one) serves partition
// "west" from the first and "east" from the second: concurrent commands on
// both land in their own server only, with their leases and snapshots; DCB
// commands run within a partition on its server; each server's global feed
// holds its own partitions; the router refuses the global feed; a new
// runtime recovers every acknowledged deposit from both servers.
func TestPartitionMoveSeveralDatabasesServeOneRuntime(t *testing.T) {
	ctx := context.Background()
	one, two, r := twoDatabases(t, map[string]string{"west": "one", "east": "two"})
	rt, move := accountRuntime(t, ctx, r, snapshotsOf(t, r, map[string]*database{"one": one, "two": two}), "node-1")

	const accounts, deposits = 4, 6
	var wg sync.WaitGroup
	errs := make(chan error, 2*accounts*deposits)
	for _, p := range []string{"west", "east"} {
		for a := range accounts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				target := runtime.Target{Partition: p, Aggregate: "account", ID: fmt.Sprint(a)}
				for range deposits {
					if _, err := rt.Execute(ctx, target, deposit{Amount: 10}); err != nil {
						errs <- fmt.Errorf("%s: %w", target, err)
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// A DCB command within each partition, on its own server.
	for _, p := range []string{"west", "east"} {
		res, err := move.Execute(ctx, moveFunds{Partition: p, From: "0", To: "1", Amount: 25})
		require.NoError(t, err, p)
		require.Len(t, res.Records, 1)
		require.Equal(t, p, res.Records[0].Partition())
	}

	// Every event, lease row and snapshot is on its partition's server only.
	for _, c := range []struct {
		db        *database
		mine, not string
	}{{one, "west", "east"}, {two, "east", "west"}} {
		require.Equal(t, accounts*deposits+1, c.db.count(t, `SELECT count(*) FROM %s.events WHERE partition = $1`, c.mine), c.mine)
		require.Zero(t, c.db.count(t, `SELECT count(*) FROM %s.events WHERE partition = $1`, c.not))
		require.Equal(t, accounts, c.db.count(t, `SELECT count(*) FROM %s.streams WHERE partition = $1 AND tag LIKE 'account:%%'`, c.mine))
		require.Zero(t, c.db.count(t, `SELECT count(*) FROM %s.streams WHERE partition = $1`, c.not))
		require.Positive(t, c.db.count(t, `SELECT count(*) FROM %s.snapshots WHERE partition = $1`, c.mine))
		require.Zero(t, c.db.count(t, `SELECT count(*) FROM %s.snapshots WHERE partition = $1`, c.not))
		// Each server's own feed holds its partition's events only.
		n := 0
		for rec, err := range c.db.journal.ReadAll(ctx, journal.Position{}, 0) {
			require.NoError(t, err)
			require.Equal(t, c.mine, rec.Partition())
			n++
		}
		require.Equal(t, accounts*deposits+1, n)
	}
	for _, err := range r.ReadAll(ctx, journal.Position{}, 0) {
		require.ErrorIs(t, err, partitioned.ErrPerDatabase)
	}
	// An append spanning the two partitions (two servers) is refused and
	// writes nothing on either.
	_, err := r.Append(ctx, []journal.Event{event("west", "Deposited", "account:9"), event("east", "Deposited", "account:9")}, journal.AppendOptions{})
	require.ErrorIs(t, err, partitioned.ErrCrossPartition)
	require.Zero(t, one.count(t, `SELECT count(*) FROM %s.events WHERE tags @> ARRAY['account:9']`))
	require.Zero(t, two.count(t, `SELECT count(*) FROM %s.events WHERE tags @> ARRAY['account:9']`))
	// The node holds a session on each server.
	for _, db := range []*database{one, two} {
		require.Equal(t, 1, db.count(t, `SELECT count(*) FROM %s.nodes WHERE node_id = 'node-1'`))
	}
	require.NoError(t, rt.Shutdown(ctx))

	// A new runtime (another node) recovers both partitions from their servers.
	rt2, _ := accountRuntime(t, ctx, r, snapshotsOf(t, r, map[string]*database{"one": one, "two": two}), "node-2")
	defer func() { require.NoError(t, rt2.Shutdown(ctx)) }()
	for _, p := range []string{"west", "east"} {
		for a := range accounts {
			s, err := runtime.State[balance](ctx, rt2, runtime.Target{Partition: p, Aggregate: "account", ID: fmt.Sprint(a)})
			require.NoError(t, err)
			require.Equal(t, deposits*10, s.State.Total, "the aggregate folds its deposits (%s/%d)", p, a)
		}
	}
}
