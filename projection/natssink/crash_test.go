package natssink_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/projection/natssink"
)

// The crash test runs the publisher in a child process (this test binary,
// re-executed with SCRIBE_NATS_CHILD set) and SIGKILLs it mid-run.

const envChild = "SCRIBE_NATS_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		if err := child(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child publishes the journal of schema SCRIBE_NATS_SCHEMA to subjects
// SCRIBE_NATS_PREFIX.<type> until it is killed or SIGTERMed. Every 16
// deliveries it prints "BATCH" and pauses briefly before the next publish,
// so that a kill lands between published and checkpointed events.
func child() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv(pgtest.EnvDatabaseURL))
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := postgres.Config{Schema: os.Getenv("SCRIBE_NATS_SCHEMA"), PollInterval: 50 * time.Millisecond}
	j, err := postgres.NewJournal(pool, cfg)
	if err != nil {
		return err
	}
	defer j.Close()
	store, err := postgres.NewProjectionStore(pool, cfg)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(natsURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	sink, err := natssink.NewFromConn(nc, natssink.Config{SubjectPrefix: os.Getenv("SCRIBE_NATS_PREFIX")})
	if err != nil {
		return err
	}
	owner := fmt.Sprintf("pid-%d", os.Getpid())
	pub, err := projection.NewPublisher(j, store, "to-nats", journal.Query{}, &announcing{Sink: sink}, projection.PublisherOptions{},
		projection.Options{Owner: owner, BatchSize: 64, LeaseTTL: time.Second, Backoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	return pub.Run(ctx)
}

type announcing struct {
	projection.Sink
	n int
}

func (a *announcing) Publish(ctx context.Context, rec journal.Record) error {
	if a.n++; a.n%16 == 0 {
		fmt.Println("BATCH")
		time.Sleep(20 * time.Millisecond)
	}
	return a.Sink.Publish(ctx, rec)
}

type proc struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
}

func startChild(t *testing.T, schema, prefix string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1", "SCRIBE_NATS_SCHEMA="+schema, "SCRIBE_NATS_PREFIX="+prefix)
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
			default:
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(p.kill)
	return p
}

// kill SIGKILLs the child (by its PID) and waits for it to exit.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

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
			t.Fatal("the publisher exited before it published")
		case <-timeout:
			t.Fatal("the publisher published nothing within 60s")
		}
	}
}

// TestCrashPublisherJetStream: a publisher process publishes N events from
// a Postgres journal to a JetStream stream and is SIGKILLed three times in
// the middle of a batch (events published, checkpoint not yet moved), then
// restarted until it caught up. The stream holds exactly N messages: every
// event once, none missing, no duplicate (the publisher published again the
// events it had not checkpointed; the broker dropped them by Nats-Msg-Id),
// in position order.
func TestCrashPublisherJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test starts child processes")
	}
	_, js := connect(t)
	pool, schema := pgtest.Pool(t)
	ctx := t.Context()
	cfg := postgres.Config{Schema: schema}
	require.NoError(t, postgres.Migrate(ctx, pool, cfg))
	j, err := postgres.NewJournal(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	store, err := postgres.NewProjectionStore(pool, cfg)
	require.NoError(t, err)
	st, prefix := newStream(t, js)

	const n = 3000
	var recs []journal.Record
	for i := 0; i < n; i += 20 {
		evs := make([]journal.Event, 20)
		for k := range evs {
			evs[k] = journal.Event{ID: journal.NewEventID(), Type: "Wrote", SchemaVersion: 1,
				Tags: []journal.Tag{journal.Tag(fmt.Sprintf("w:%d", (i+k)%32))}, Data: []byte(fmt.Sprintf(`{"n":%d}`, i+k))}
		}
		res, err := j.Append(ctx, evs, journal.AppendOptions{})
		require.NoError(t, err)
		recs = append(recs, res.Records...)
	}
	require.Len(t, recs, n)
	key := projection.Key{Name: "to-nats", Version: 1}

	republished := 0
	for i := range 3 {
		p := startChild(t, schema, prefix)
		p.waitBatches(t, 2+3*i)
		p.kill()
		status, err := store.Status(ctx, key)
		require.NoError(t, err)
		info, err := st.Info(ctx)
		require.NoError(t, err)
		ahead := int(info.State.Msgs) - int(status.Events)
		t.Logf("kill %d: the stream holds %d messages, the checkpoint counts %d events: %d published but not checkpointed", i+1, info.State.Msgs, status.Events, ahead)
		require.GreaterOrEqual(t, ahead, 0)
		republished += ahead
	}
	require.Positive(t, republished, "no kill landed between a publish and its checkpoint: the test proved nothing about duplicates")

	start := time.Now()
	startChild(t, schema, prefix)
	require.Eventually(t, func() bool {
		s, err := store.Status(ctx, key)
		require.NoError(t, err)
		return !s.Checkpoint.Before(recs[n-1].Position)
	}, 120*time.Second, 20*time.Millisecond, "the restarted publisher did not catch up")
	t.Logf("the restarted publisher caught up in %s", time.Since(start).Round(time.Millisecond))

	msgs := streamMessages(t, st)
	want := make(map[string]int, n)
	for i, r := range recs {
		want[r.ID.String()] = i
	}
	seen := map[string]int{}
	missing, dups, outOfOrder, last := 0, 0, 0, -1
	for _, m := range msgs {
		id := m.Headers().Get(jetstream.MsgIDHeader)
		_, err := uuid.Parse(id)
		require.NoError(t, err)
		seen[id]++
		if seen[id] > 1 {
			dups++
		}
		if i, ok := want[id]; ok {
			if i < last {
				outOfOrder++
			}
			last = i
		}
	}
	for id := range want {
		if seen[id] == 0 {
			missing++
		}
	}
	t.Logf("%d events, %d messages in the stream: %d missing, %d duplicates, %d out of position order; at the kills %d events in all had been published but not checkpointed (published again after the restarts, dropped by the broker)",
		n, len(msgs), missing, dups, outOfOrder, republished)
	require.Zero(t, missing)
	require.Zero(t, dups)
	require.Zero(t, outOfOrder)
	require.Len(t, msgs, n)
	dl, err := store.DeadLetters(ctx, key)
	require.NoError(t, err)
	require.Empty(t, dl)
}
