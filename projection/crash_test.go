package projection_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
)

// The crash tests run projection runners in child processes (this test
// binary, re-executed with SCRIBE_PROJ_CHILD set), kill and pause them, and
// check the read model they leave in Postgres.

const envChild = "SCRIBE_PROJ_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		if err := child(mode); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child runs a projector or a publisher until it is killed or SIGTERMed.
// It prints "BATCH <owner>" when a batch starts to be applied (or delivered)
// and then holds the batch open for a moment, so that a kill lands inside.
func child(mode string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	schema := os.Getenv("SCRIBE_PROJ_SCHEMA")
	pool, err := pgxpool.New(ctx, os.Getenv(pgtest.EnvDatabaseURL))
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := postgres.Config{Schema: schema, PollInterval: 50 * time.Millisecond}
	j, err := postgres.NewJournal(pool, cfg)
	if err != nil {
		return err
	}
	defer j.Close()
	store, err := postgres.NewProjectionStore(pool, cfg)
	if err != nil {
		return err
	}
	ttl, err := time.ParseDuration(os.Getenv("SCRIBE_PROJ_TTL"))
	if err != nil {
		return err
	}
	owner := fmt.Sprintf("pid-%d", os.Getpid())
	o := projection.Options{Owner: owner, BatchSize: 64, LeaseTTL: ttl, Backoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	hold := 20 * time.Millisecond
	var r interface{ Run(context.Context) error }
	switch mode {
	case "projector":
		applied := pgx.Identifier{schema, "applied"}.Sanitize()
		batches := pgx.Identifier{schema, "batches"}.Sanitize()
		p := projection.Projection[pgx.Tx]{Name: "crash", Version: 1, Handle: func(ctx context.Context, tx pgx.Tx, b projection.Batch) error {
			fmt.Printf("BATCH %s\n", owner)
			var started time.Time
			if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&started); err != nil {
				return err
			}
			ids := make([]uuid.UUID, len(b.Records))
			for i, rec := range b.Records {
				ids[i] = rec.ID
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+applied+` (id, n) SELECT id, 1 FROM unnest($1::uuid[]) AS id
				ON CONFLICT (id) DO UPDATE SET n = `+applied+`.n + 1`, ids); err != nil {
				return err
			}
			time.Sleep(hold)
			_, err := tx.Exec(ctx, `INSERT INTO `+batches+` (owner, epoch, records, started, ended) VALUES ($1, $2, $3, $4, clock_timestamp())`,
				owner, int64(b.Epoch), len(b.Records), started)
			return err
		}}
		r, err = projection.NewRunner(j, store, p, o)
	case "sliced":
		r, err = slicedChild(j, store, owner, o, schema, hold)
	case "publisher":
		sink := &announcing{Sink: &projection.WebhookSink{URL: os.Getenv("SCRIBE_PROJ_HOOK")}, owner: owner, hold: hold}
		r, err = projection.NewPublisher(j, store, "crash-pub", journal.Query{}, sink, projection.PublisherOptions{}, o)
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

// announcing prints a BATCH line every 16 deliveries, then pauses briefly.
type announcing struct {
	projection.Sink
	owner string
	hold  time.Duration
	n     int
}

func (a *announcing) Publish(ctx context.Context, rec journal.Record) error {
	if a.n++; a.n%16 == 0 {
		fmt.Printf("BATCH %s\n", a.owner)
		time.Sleep(a.hold)
	}
	return a.Sink.Publish(ctx, rec)
}

// proc is a running child.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
}

func startChild(t *testing.T, mode, schema string, ttl time.Duration, hook string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+mode, "SCRIBE_PROJ_SCHEMA="+schema, "SCRIBE_PROJ_TTL="+ttl.String(), "SCRIBE_PROJ_HOOK="+hook)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody listens: drop
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// waitBatches waits until the child announced n more batches.
func (p *proc) waitBatches(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for n > 0 {
		select {
		case l := <-p.lines:
			if strings.HasPrefix(l, "BATCH") {
				n--
			}
		case <-p.done:
			t.Fatal("the child exited before it applied the batches")
		case <-timeout:
			t.Fatal("the child applied no batch within 60s")
		}
	}
}

// writers runs 64 writers, each appending events one by one to its own
// stream with an expected version, until stop is closed or it has appended
// perWriter events (0: no cap); it returns the appended records. The cap keeps the work a
// test hands its runners independent of how fast the machine writes: uncapped,
// a fast machine wrote 30,000 events while the publisher was killed three
// times, and delivering them one by one outlasted the test's patience on a
// loaded CI machine.
func writers(t *testing.T, j journal.Journal, stop <-chan struct{}, perWriter uint64) func() []journal.Record {
	var mu sync.Mutex
	var all []journal.Record
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tag := journal.Tag(fmt.Sprintf("w:%d", w))
			for v := uint64(0); perWriter == 0 || v < perWriter; v++ {
				select {
				case <-stop:
					return
				default:
				}
				res, err := j.Append(context.Background(), []journal.Event{{ID: journal.NewEventID(), Type: "Wrote", SchemaVersion: 1,
					Tags: []journal.Tag{tag}, Data: []byte(`{}`)}}, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: v}})
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

// lastPosition returns the newest position among recs.
func lastPosition(recs []journal.Record) journal.Position {
	var last journal.Position
	for _, r := range recs {
		if r.Position.After(last) {
			last = r.Position
		}
	}
	return last
}

type crashEnv struct {
	pool   *pgxpool.Pool
	schema string
	j      *postgres.Journal
	store  *postgres.ProjectionStore
}

func newCrashEnv(t *testing.T) crashEnv {
	if testing.Short() {
		t.Skip("crash tests start child processes")
	}
	pool, schema := pgtest.Pool(t)
	cfg := postgres.Config{Schema: schema}
	ctx := context.Background()
	require.NoError(t, postgres.Migrate(ctx, pool, cfg))
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	store, err := postgres.NewProjectionStore(pool, cfg)
	require.NoError(t, err)
	for _, ddl := range []string{
		`CREATE TABLE ` + pgx.Identifier{schema, "applied"}.Sanitize() + ` (id uuid PRIMARY KEY, n int NOT NULL)`,
		`CREATE TABLE ` + pgx.Identifier{schema, "batches"}.Sanitize() + ` (owner text, epoch bigint, records int, started timestamptz, ended timestamptz)`,
	} {
		_, err := pool.Exec(ctx, ddl)
		require.NoError(t, err)
	}
	return crashEnv{pool: pool, schema: schema, j: j, store: store}
}

// waitCheckpoint waits until the projection's stored checkpoint reaches pos.
func (e crashEnv) waitCheckpoint(t *testing.T, k projection.Key, pos journal.Position) {
	t.Helper()
	require.Eventually(t, func() bool {
		st, err := e.store.Status(context.Background(), k)
		require.NoError(t, err)
		return !st.Checkpoint.Before(pos)
	}, 120*time.Second, 20*time.Millisecond, "the projection did not catch up")
}

// checkExactlyOnce compares the read model with the journal.
func (e crashEnv) checkExactlyOnce(t *testing.T, recs []journal.Record) {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT id, n FROM `+pgx.Identifier{e.schema, "applied"}.Sanitize())
	require.NoError(t, err)
	got := map[uuid.UUID]int{}
	for rows.Next() {
		var id uuid.UUID
		var n int
		require.NoError(t, rows.Scan(&id, &n))
		got[id] = n
	}
	require.NoError(t, rows.Err())
	missed, twice := 0, 0
	for _, r := range recs {
		switch got[r.ID] {
		case 0:
			missed++
		case 1:
		default:
			twice++
		}
	}
	t.Logf("%d events: %d missed, %d applied more than once", len(recs), missed, twice)
	require.Zero(t, missed)
	require.Zero(t, twice)
	require.Len(t, got, len(recs))
}

// TestCrashProjector: 64 writers; the projector is SIGKILLed inside a batch
// three times; the read model ends equal to the journal, every event applied
// exactly once.
func TestCrashProjector(t *testing.T) {
	e := newCrashEnv(t)
	stop := make(chan struct{})
	wait := writers(t, e.j, stop, 256)
	for i := range 3 {
		p := startChild(t, "projector", e.schema, 2*time.Second, "")
		p.waitBatches(t, 3+i)
		p.kill() // inside the batch: it holds its transaction open for a moment after announcing it
	}
	close(stop)
	recs := wait()
	last := lastPosition(recs)
	// The last child claims as soon as the killed one's lease lapses.
	startChild(t, "projector", e.schema, 2*time.Second, "")
	e.waitCheckpoint(t, projection.Key{Name: "crash", Version: 1}, last)
	e.checkExactlyOnce(t, recs)
}

// TestTwoProjectorsNeverOverlap: two projector processes run at once; the
// active one is paused past its lease twice, so the other takes over and
// the paused one wakes up behind. The read model records every committed
// batch's start and end (database clock): no two overlap, epochs never go
// back, and every event is applied exactly once.
func TestTwoProjectorsNeverOverlap(t *testing.T) {
	e := newCrashEnv(t)
	stop := make(chan struct{})
	wait := writers(t, e.j, stop, 0) // no cap: each pause needs a batch in flight
	ttl := time.Second
	a := startChild(t, "projector", e.schema, ttl, "")
	b := startChild(t, "projector", e.schema, ttl, "")
	for range 2 {
		// Pause whichever is applying: the first to announce a batch.
		var active *proc
		for active == nil {
			select {
			case l := <-a.lines:
				if strings.HasPrefix(l, "BATCH") {
					active = a
				}
			case l := <-b.lines:
				if strings.HasPrefix(l, "BATCH") {
					active = b
				}
			case <-time.After(60 * time.Second):
				t.Fatal("no batch within 60s")
			}
		}
		require.NoError(t, active.cmd.Process.Signal(syscall.SIGSTOP))
		time.Sleep(3 * ttl)
		require.NoError(t, active.cmd.Process.Signal(syscall.SIGCONT))
	}
	close(stop)
	recs := wait()
	last := lastPosition(recs)
	e.waitCheckpoint(t, projection.Key{Name: "crash", Version: 1}, last)
	a.kill()
	b.kill()
	e.checkExactlyOnce(t, recs)

	rows, err := e.pool.Query(context.Background(), `SELECT owner, epoch, started, ended FROM `+pgx.Identifier{e.schema, "batches"}.Sanitize()+` ORDER BY started`)
	require.NoError(t, err)
	var prevEnd time.Time
	var prevEpoch int64
	owners := map[string]bool{}
	n := 0
	for rows.Next() {
		var owner string
		var epoch int64
		var started, ended time.Time
		require.NoError(t, rows.Scan(&owner, &epoch, &started, &ended))
		require.False(t, started.Before(prevEnd), "batch %d of %s (epoch %d) started at %s, before the previous batch ended at %s", n, owner, epoch, started, prevEnd)
		require.GreaterOrEqual(t, epoch, prevEpoch, "epochs went back")
		prevEnd, prevEpoch = ended, epoch
		owners[owner] = true
		n++
	}
	require.NoError(t, rows.Err())
	t.Logf("%d batches by %d runners", n, len(owners))
	require.Len(t, owners, 2, "the standby never took over")
}

// TestCrashPublisher: 64 writers; the publisher is SIGKILLed during its
// deliveries three times. Every event reaches the webhook at least once, and
// per stream no version arrives before its predecessor has; duplicates are
// counted and reported.
func TestCrashPublisher(t *testing.T) {
	e := newCrashEnv(t)
	var mu sync.Mutex
	seen := map[uuid.UUID]int{}
	maxVersion := map[journal.Tag]uint64{}
	var outOfOrder []string
	deliveries := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m projection.Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id, err := uuid.Parse(m.ID)
		if err != nil || len(m.Tags) != 1 || len(m.Versions) != 1 {
			http.Error(w, "unexpected message", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		deliveries++
		seen[id]++
		tag, v := m.Tags[0], m.Versions[0]
		if v > maxVersion[tag]+1 {
			outOfOrder = append(outOfOrder, fmt.Sprintf("%s v%d after v%d", tag, v, maxVersion[tag]))
		}
		maxVersion[tag] = max(maxVersion[tag], v)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)

	stop := make(chan struct{})
	wait := writers(t, e.j, stop, 96)
	for i := range 3 {
		p := startChild(t, "publisher", e.schema, 2*time.Second, srv.URL)
		p.waitBatches(t, 3+i)
		p.kill()
	}
	close(stop)
	recs := wait()
	last := lastPosition(recs)
	startChild(t, "publisher", e.schema, 2*time.Second, srv.URL)
	e.waitCheckpoint(t, projection.Key{Name: "crash-pub", Version: 1}, last)

	mu.Lock()
	defer mu.Unlock()
	missed, dups := 0, 0
	for _, r := range recs {
		switch n := seen[r.ID]; {
		case n == 0:
			missed++
		case n > 1:
			dups += n - 1
		}
	}
	t.Logf("%d events, %d deliveries: %d never delivered, %d duplicate deliveries, %d out of stream order", len(recs), deliveries, missed, dups, len(outOfOrder))
	require.Zero(t, missed)
	require.Empty(t, outOfOrder)
	dl, err := e.store.DeadLetters(context.Background(), projection.Key{Name: "crash-pub", Version: 1})
	require.NoError(t, err)
	require.Empty(t, dl)
}
