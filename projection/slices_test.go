package projection_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

// sliceWriters runs n writers until stop is closed: writer w appends to its
// stream acct:w with an expected version; every fourth event is a transfer
// that also carries acct:t<w>, a stream only these transfers write (two
// slices, usually). It returns the
// appended records.
func sliceWriters(t *testing.T, j journal.Journal, n int, stop <-chan struct{}) func() []journal.Record {
	var mu sync.Mutex
	var all []journal.Record
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tag := journal.Tag(fmt.Sprintf("acct:%d", w))
			for v := uint64(0); ; v++ {
				select {
				case <-stop:
					return
				default:
				}
				ev := journal.Event{ID: journal.NewEventID(), Type: "Deposited", SchemaVersion: 1, Tags: []journal.Tag{tag}, Data: []byte(`{}`)}
				if v%4 == 3 {
					ev.Type, ev.Tags = "Transferred", []journal.Tag{tag, journal.Tag(fmt.Sprintf("acct:t%d", w))}
				}
				res, err := j.Append(context.Background(), []journal.Event{ev}, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: v}})
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				mu.Lock()
				all = append(all, res.Records...)
				mu.Unlock()
			}
		}()
	}
	return func() []journal.Record {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return all
	}
}

// sliceLedger is a sliced read model kept by a test: what was applied per
// (event, slice), the last version applied per stream, and the per-stream
// order and slice-overlap violations seen.
type sliceLedger struct {
	s          projection.Slicing
	mu         sync.Mutex
	applied    map[[2]string]int // event ID, slice → times applied
	last       map[journal.Tag]uint64
	busy       map[int]string // slice → owner applying a batch now
	violations []string
	owners     map[string]bool
}

func newSliceLedger(s projection.Slicing) *sliceLedger {
	return &sliceLedger{s: s, applied: map[[2]string]int{}, last: map[journal.Tag]uint64{}, busy: map[int]string{}, owners: map[string]bool{}}
}

// handle applies b for owner, marking its slices busy while it runs.
func (l *sliceLedger) handle(owner string, b projection.Batch, during func()) {
	l.mu.Lock()
	touched := map[int]bool{}
	for _, s := range b.Slices {
		if o, ok := l.busy[s]; ok && !touched[s] {
			l.violations = append(l.violations, fmt.Sprintf("slice %d applied by %s while %s applies it", s, owner, o))
		}
		touched[s] = true
	}
	for s := range touched {
		l.busy[s] = owner
	}
	l.owners[owner] = true
	l.mu.Unlock()
	if during != nil {
		during()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for s := range touched {
		delete(l.busy, s)
	}
	for i, rec := range b.Records {
		s := b.Slices[i]
		l.applied[[2]string{rec.ID.String(), fmt.Sprint(s)}]++
		for _, tag := range l.s.TagsIn(rec, s) {
			if v := rec.Version(tag); v != l.last[tag]+1 {
				l.violations = append(l.violations, fmt.Sprintf("%s v%d applied after v%d", tag, v, l.last[tag]))
			}
			l.last[tag] = max(l.last[tag], rec.Version(tag))
		}
	}
}

// check compares the ledger with the journal's records: each record
// applied exactly once for each of its slices, nothing else, no violation.
func (l *sliceLedger) check(t *testing.T, recs []journal.Record) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	want := 0
	missed, twice := 0, 0
	for _, r := range recs {
		seen := map[int]bool{}
		for _, tag := range r.Tags {
			s, ok := l.s.SliceOf(tag)
			if !ok || seen[s] {
				continue // two tags in one slice: one delivery
			}
			seen[s] = true
			want++
			switch l.applied[[2]string{r.ID.String(), fmt.Sprint(s)}] {
			case 0:
				missed++
			case 1:
			default:
				twice++
			}
		}
	}
	t.Logf("%d events, %d deliveries expected: %d missed, %d applied more than once; %d runners applied batches", len(recs), want, missed, twice, len(l.owners))
	require.Empty(t, l.violations)
	require.Zero(t, missed)
	require.Zero(t, twice)
	require.Len(t, l.applied, want)
}

// waitSlicesCaughtUp waits until every slice's stored checkpoint is at or
// after the newest of recs delivered to it.
func waitSlicesCaughtUp(t *testing.T, st projection.Store[projection.NoTx], k projection.Key, s projection.Slicing, recs []journal.Record) {
	t.Helper()
	waitSlices(t, func(ctx context.Context) ([]projection.SliceStatus, error) {
		sts, _, err := st.Slices(ctx, k)
		return sts, err
	}, s, recs)
}

func waitSlices(t *testing.T, statuses func(ctx context.Context) ([]projection.SliceStatus, error), s projection.Slicing, recs []journal.Record) {
	t.Helper()
	newest := map[int]journal.Position{}
	for _, r := range recs {
		for _, tag := range r.Tags {
			if i, ok := s.SliceOf(tag); ok && r.Position.After(newest[i]) {
				newest[i] = r.Position
			}
		}
	}
	require.Eventually(t, func() bool {
		sts, err := statuses(context.Background())
		require.NoError(t, err)
		for _, st := range sts {
			if st.Checkpoint.Before(newest[st.Slice]) {
				return false
			}
		}
		return len(sts) == s.Count
	}, 120*time.Second, 20*time.Millisecond, "the slices did not catch up")
}

// TestSliceRunnersMemory: three sliced runners share 16 slices on the memory
// store while 16 writers append; one runner stops and another starts during
// the run. Every record is applied exactly once per slice, per-stream order
// holds, no slice is applied by two runners at once, and every runner that
// ran held slices.
func TestSliceRunnersMemory(t *testing.T) {
	t.Parallel()
	j := memory.New()
	store := projection.NewMemoryStore()
	sl := projection.Slicing{Group: "acct", Count: 16}
	ledger := newSliceLedger(sl)
	batches := make(chan string, 1024)
	start := func(owner string) (context.CancelFunc, <-chan error) {
		p := projection.Projection[projection.NoTx]{Name: "sliced", Version: 1, Slicing: &sl,
			Handle: func(ctx context.Context, _ projection.NoTx, b projection.Batch) error {
				ledger.handle(owner, b, func() {
					select {
					case batches <- owner:
					default:
					}
				})
				return nil
			}}
		r, err := projection.NewRunner(j, store, p, projection.Options{Owner: owner, BatchSize: 16, LeaseTTL: 200 * time.Millisecond, Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		exited := make(chan struct{})
		go func() { done <- r.Run(ctx); close(exited) }()
		t.Cleanup(func() { cancel(); <-exited })
		return cancel, done
	}
	waitOwner := func(owner string) {
		timeout := time.After(30 * time.Second)
		for {
			select {
			case o := <-batches:
				if o == owner {
					return
				}
			case <-timeout:
				t.Fatalf("%s applied no batch", owner)
			}
		}
	}
	stop := make(chan struct{})
	wait := sliceWriters(t, j, 16, stop)
	stopA, doneA := start("a")
	start("b")
	start("c")
	for _, o := range []string{"a", "b", "c"} {
		waitOwner(o)
	}
	stopA()
	require.NoError(t, <-doneA)
	start("d")
	waitOwner("d")
	close(stop)
	recs := wait()
	waitSlicesCaughtUp(t, store, projection.Key{Name: "sliced", Version: 1}, sl, recs)
	ledger.check(t, recs)
	require.Len(t, ledger.owners, 4)
}

// sliceTestSlicing is the slicing of the sliced crash test's projection.
var sliceTestSlicing = projection.Slicing{Group: "acct", Count: 32}

// slicedChild returns the runner of a sliced projector child: its handler
// records each delivery in slice_applied, checks per-stream order against
// slice_streams (a violation is a row of slice_violations), holds the batch
// open for hold, and logs it in slice_batches (one row per slice, with the
// database clock at its start and end), all in the batch's transaction.
func slicedChild(j *postgres.Journal, store *postgres.ProjectionStore, owner string, o projection.Options, schema string, hold time.Duration) (interface{ Run(context.Context) error }, error) {
	sl := sliceTestSlicing
	t := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	p := projection.Projection[pgx.Tx]{Name: "sliced", Version: 1, Slicing: &sl, Handle: func(ctx context.Context, tx pgx.Tx, b projection.Batch) error {
		fmt.Printf("BATCH %s\n", owner)
		var started time.Time
		if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&started); err != nil {
			return err
		}
		ids := make([]uuid.UUID, len(b.Records))
		ss := make([]int32, len(b.Records))
		var tags []string
		for i, rec := range b.Records {
			ids[i], ss[i] = rec.ID, int32(b.Slices[i])
			for _, tag := range sl.TagsIn(rec, b.Slices[i]) {
				tags = append(tags, string(tag))
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+t("slice_applied")+` (id, slice, n) SELECT id, s, 1 FROM unnest($1::uuid[], $2::int[]) AS u(id, s)
			ON CONFLICT (id, slice) DO UPDATE SET n = `+t("slice_applied")+`.n + 1`, ids, ss); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT tag, version FROM `+t("slice_streams")+` WHERE tag = ANY($1::text[])`, tags)
		if err != nil {
			return err
		}
		last := map[string]int64{}
		for rows.Next() {
			var tag string
			var v int64
			if err := rows.Scan(&tag, &v); err != nil {
				return err
			}
			last[tag] = v
		}
		if err := rows.Err(); err != nil {
			return err
		}
		var violations []string
		for i, rec := range b.Records {
			for _, tag := range sl.TagsIn(rec, b.Slices[i]) {
				v := int64(rec.Version(tag))
				if v != last[string(tag)]+1 {
					violations = append(violations, fmt.Sprintf("%s v%d applied after v%d by %s", tag, v, last[string(tag)], owner))
				}
				last[string(tag)] = max(v, last[string(tag)])
			}
		}
		ut, uv := make([]string, 0, len(last)), make([]int64, 0, len(last))
		for tag, v := range last {
			ut, uv = append(ut, tag), append(uv, v)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+t("slice_streams")+` (tag, version) SELECT * FROM unnest($1::text[], $2::bigint[])
			ON CONFLICT (tag) DO UPDATE SET version = EXCLUDED.version`, ut, uv); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+t("slice_violations")+` (msg) SELECT unnest($1::text[])`, violations); err != nil {
			return err
		}
		time.Sleep(hold)
		_, err = tx.Exec(ctx, `INSERT INTO `+t("slice_batches")+` (owner, slice, started, ended) SELECT $1, s, $2::timestamptz, clock_timestamp() FROM (SELECT DISTINCT unnest($3::int[])) AS u(s)`,
			owner, started, ss)
		return err
	}}
	return projection.NewRunner(j, store, p, o)
}

// TestSliceRunnersPostgres: four sliced projector processes share 32 slices
// while 64 writers append (a quarter of the events are transfers carrying
// two account tags); one process is SIGKILLed inside a batch and a fifth is
// started during the run. The read model ends holding every record exactly
// once per slice, per-stream order held, and the batch log shows that no
// slice was ever applied by two runners at once.
func TestSliceRunnersPostgres(t *testing.T) {
	e := newCrashEnv(t)
	ctx := context.Background()
	for _, ddl := range []string{
		`CREATE TABLE ` + pgx.Identifier{e.schema, "slice_applied"}.Sanitize() + ` (id uuid, slice int, n int NOT NULL, PRIMARY KEY (id, slice))`,
		`CREATE TABLE ` + pgx.Identifier{e.schema, "slice_streams"}.Sanitize() + ` (tag text PRIMARY KEY, version bigint NOT NULL)`,
		`CREATE TABLE ` + pgx.Identifier{e.schema, "slice_violations"}.Sanitize() + ` (msg text)`,
		`CREATE TABLE ` + pgx.Identifier{e.schema, "slice_batches"}.Sanitize() + ` (owner text, slice int, started timestamptz, ended timestamptz)`,
	} {
		_, err := e.pool.Exec(ctx, ddl)
		require.NoError(t, err)
	}
	stop := make(chan struct{})
	wait := sliceWriters(t, e.j, 64, stop)
	ttl := time.Second
	var procs []*proc
	for range 4 {
		procs = append(procs, startChild(t, "sliced", e.schema, ttl, ""))
	}
	for _, p := range procs {
		p.waitBatches(t, 2)
	}
	procs[0].waitBatches(t, 1)
	procs[0].kill() // inside a batch: it holds its transaction open after announcing it
	fifth := startChild(t, "sliced", e.schema, ttl, "")
	fifth.waitBatches(t, 10)
	for _, p := range procs[1:] {
		p.waitBatches(t, 3)
	}
	close(stop)
	recs := wait()
	k := projection.Key{Name: "sliced", Version: 1}
	waitSlices(t, func(ctx context.Context) ([]projection.SliceStatus, error) {
		sts, _, err := e.store.Slices(ctx, k)
		return sts, err
	}, sliceTestSlicing, recs)
	for _, p := range append(procs[1:], fifth) {
		p.kill()
	}

	ledger := newSliceLedger(sliceTestSlicing)
	rows, err := e.pool.Query(ctx, `SELECT id, slice, n FROM `+pgx.Identifier{e.schema, "slice_applied"}.Sanitize())
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var s, n int
		require.NoError(t, rows.Scan(&id, &s, &n))
		ledger.applied[[2]string{id.String(), fmt.Sprint(s)}] = n
	}
	require.NoError(t, rows.Err())
	rows, err = e.pool.Query(ctx, `SELECT msg FROM `+pgx.Identifier{e.schema, "slice_violations"}.Sanitize())
	require.NoError(t, err)
	ledger.violations, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)

	rows, err = e.pool.Query(ctx, `SELECT owner, slice, started, ended FROM `+pgx.Identifier{e.schema, "slice_batches"}.Sanitize()+` ORDER BY slice, started`)
	require.NoError(t, err)
	defer rows.Close()
	prevEnd := map[int]time.Time{}
	n := 0
	for rows.Next() {
		var owner string
		var s int
		var started, ended time.Time
		require.NoError(t, rows.Scan(&owner, &s, &started, &ended))
		require.False(t, started.Before(prevEnd[s]), "a batch of slice %d by %s started at %s, before the slice's previous batch ended at %s", s, owner, started, prevEnd[s])
		prevEnd[s] = ended
		ledger.owners[owner] = true
		n++
	}
	require.NoError(t, rows.Err())
	t.Logf("%d slice batches", n)
	ledger.check(t, recs)
	require.Len(t, ledger.owners, 5, "every runner, the killed one and the added one too, applied batches")
}
