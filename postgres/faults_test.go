package postgres_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// terminate kills the server backend of conn and waits until it has exited.
func terminate(ctx context.Context, t *testing.T, admin *pgxpool.Pool, conn *pgxpool.Conn) {
	t.Helper()
	pid := conn.Conn().PgConn().PID()
	var ok bool
	require.NoError(t, admin.QueryRow(ctx, "SELECT pg_terminate_backend($1, 10000)", int32(pid)).Scan(&ok))
	require.True(t, ok, "backend %d terminated", pid)
}

func requireNothingWritten(ctx context.Context, t *testing.T, j *postgres.Journal, stream journal.StreamID, events ...journal.Event) {
	t.Helper()
	for _, e := range events {
		_, err := j.ReadEvent(ctx, e.ID)
		require.ErrorIs(t, err, journal.ErrNotFound, "no partial write")
	}
	sum, err := j.TagSummary(ctx, stream)
	require.NoError(t, err)
	require.Zero(t, sum.Version, "the stream's version did not move")
}

// TestFaultBackendKilledMidAppend kills the appending backend inside the
// transaction, after the checks and before the insert.
func TestFaultBackendKilledMidAppend(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *postgres.Config) { c.Batching.Disabled = true })
	j := f.journal
	ctx := t.Context()
	stream := journal.Stream("account:killed")
	var armed atomic.Bool
	armed.Store(true)
	j.SetAfterChecks(func(ctx context.Context, conn *pgxpool.Conn) error {
		if armed.CompareAndSwap(true, false) {
			terminate(ctx, t, f.pool, conn)
		}
		return nil
	})
	events := []journal.Event{event("A", stream.Tag), event("B", stream.Tag)}
	_, err := j.Append(ctx, events, journal.AppendOptions{Expect: map[journal.Tag]uint64{stream.Tag: 0}})
	require.Error(t, err, "the killed append reports an error")
	require.NotErrorIs(t, err, journal.ErrOutcomeUnknown, "the backend died before COMMIT: nothing was written, and that is known")
	requireNothingWritten(ctx, t, j, stream, events...)

	// The next append runs on a fresh connection; the same events go in.
	res, err := j.Append(ctx, events, journal.AppendOptions{Expect: map[journal.Tag]uint64{stream.Tag: 0}})
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	n, err := journal.VerifyStream(ctx, j, stream)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
}

// TestFaultBackendKilledBeforeCommit kills the backend just before COMMIT:
// the outcome is reported as unknown, and retrying the same append resolves it.
func TestFaultBackendKilledBeforeCommit(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *postgres.Config) { c.Batching.Disabled = true })
	j := f.journal
	ctx := t.Context()
	stream := journal.Stream("account:commit-killed")
	var armed atomic.Bool
	armed.Store(true)
	j.SetBeforeCommit(func(ctx context.Context, conn *pgxpool.Conn) error {
		if armed.CompareAndSwap(true, false) {
			terminate(ctx, t, f.pool, conn)
		}
		return nil
	})
	events := []journal.Event{event("A", stream.Tag)}
	_, err := j.Append(ctx, events, journal.AppendOptions{})
	require.ErrorIs(t, err, journal.ErrOutcomeUnknown)
	requireNothingWritten(ctx, t, j, stream, events...)

	res, err := j.Append(ctx, events, journal.AppendOptions{})
	require.NoError(t, err, "the retry resolves the unknown outcome")
	require.False(t, res.Duplicate, "the first attempt did not commit")
	got, err := j.ReadEvent(ctx, events[0].ID)
	require.NoError(t, err)
	require.Equal(t, res.Records[0].Position, got.Position)
}

// TestFaultCommitAckLost: the server commits but the connection breaks before
// the client hears so (a proxy drops the connection instead of forwarding
// COMMIT's reply). The append reports ErrOutcomeUnknown; retrying the same
// append returns the stored records marked Duplicate.
func TestFaultCommitAckLost(t *testing.T) {
	t.Parallel()
	for _, batched := range []bool{false, true} {
		t.Run("batched="+strconv.FormatBool(batched), func(t *testing.T) {
			t.Parallel()
			px, j := proxiedJournal(t, postgres.BatchingConfig{Disabled: !batched})
			ctx := t.Context()
			stream := journal.Stream("account:ack-lost")

			events := []journal.Event{event("A", stream.Tag), event("B", stream.Tag)}
			px.dropCommit.Store(true)
			_, err := j.Append(ctx, events, journal.AppendOptions{Expect: map[journal.Tag]uint64{stream.Tag: 0}})
			require.ErrorIs(t, err, journal.ErrOutcomeUnknown)
			require.False(t, px.dropCommit.Load(), "the proxy dropped a COMMIT reply")

			res, err := j.Append(ctx, events, journal.AppendOptions{Expect: map[journal.Tag]uint64{stream.Tag: 0}})
			require.NoError(t, err, "the retry resolves the unknown outcome")
			require.True(t, res.Duplicate, "the first attempt had committed")
			require.Len(t, res.Records, 2)
			for i, r := range res.Records {
				require.Equal(t, events[i].ID, r.ID)
			}
			n, err := journal.VerifyStream(ctx, j, stream)
			require.NoError(t, err)
			require.EqualValues(t, 2, n)
		})
	}
}

func pxpool(t *testing.T, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err == nil {
		t.Cleanup(pool.Close)
	}
	return pool, err
}

// proxy forwards TCP connections to Postgres; when dropCommit is set, it
// closes the connection instead of forwarding the next COMMIT CommandComplete.
type proxy struct {
	ln         net.Listener
	port       uint16
	dropCommit atomic.Bool
	down       atomic.Bool // refuse connections (accept, then close at once)
	wg         sync.WaitGroup
	mu         sync.Mutex
	conns      []net.Conn
}

func startProxy(t *testing.T, host string, port uint16) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, port: uint16(ln.Addr().(*net.TCPAddr).Port)}
	target := net.JoinHostPort(host, strconv.Itoa(int(port)))
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.down.Load() {
				c.Close()
				continue
			}
			s, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() {
				defer p.wg.Done()
				_, _ = io.Copy(s, c)
				s.Close()
				c.Close()
			}()
			go func() {
				defer p.wg.Done()
				defer c.Close()
				defer s.Close()
				p.forward(c, s)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// cut makes the database unreachable through the proxy: open connections are
// closed and new ones refused, until restore.
func (p *proxy) cut() {
	p.down.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) restore() { p.down.Store(false) }

// reset closes the connections open through the proxy and keeps accepting new
// ones: what a restarted load balancer or an idle-timeout in between does.
func (p *proxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// proxiedJournal is a journal on a fresh schema whose connections all pass
// through a proxy the test controls; both are closed when the test ends.
func proxiedJournal(t *testing.T, batching postgres.BatchingConfig) (*proxy, *postgres.Journal) {
	t.Helper()
	px, _, j, _ := proxiedJournalWith(t, batching, nil)
	return px, j
}

// proxiedJournalWith is proxiedJournal with the proxied pool's configuration
// edited (when edit is not nil); it returns that pool and the schema too.
func proxiedJournalWith(t *testing.T, batching postgres.BatchingConfig, edit func(*pgxpool.Config)) (*proxy, *pgxpool.Pool, *postgres.Journal, string) {
	t.Helper()
	f := setup(t)
	px := startProxy(t, f.pool.Config().ConnConfig.Host, f.pool.Config().ConnConfig.Port)
	pcfg := f.pool.Config().Copy()
	pcfg.ConnConfig.Host, pcfg.ConnConfig.Port = "127.0.0.1", px.port
	if edit != nil {
		edit(pcfg)
	}
	pool, err := pxpool(t, pcfg)
	require.NoError(t, err)
	j, err := postgres.NewJournal(pool, postgres.Config{Schema: f.cfg.Schema, Batching: batching})
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	return px, pool, j, f.cfg.Schema
}

// TestFaultDatabaseUnreachable: while the database cannot be reached, every
// kind of call fails with journal.ErrUnavailable within its context (an
// append that never reached COMMIT is not an unknown outcome); once it is
// reachable again, the same journal and pool serve again.
func TestFaultDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	px, j := proxiedJournal(t, postgres.BatchingConfig{})
	ctx := t.Context()
	stream := journal.Stream("account:outage")
	node, err := j.OpenNode(ctx, "outage", time.Minute)
	require.NoError(t, err)
	_, err = j.Append(ctx, []journal.Event{event("A", stream.Tag)}, journal.AppendOptions{})
	require.NoError(t, err)

	px.cut()
	calls := map[string]func(context.Context) error{
		"append": func(ctx context.Context) error {
			_, err := j.Append(ctx, []journal.Event{event("B", stream.Tag)}, journal.AppendOptions{})
			return err
		},
		"read stream": func(ctx context.Context) error {
			for _, err := range j.ReadStream(ctx, stream, 1, 0) {
				if err != nil {
					return err
				}
			}
			return nil
		},
		"tag summary": func(ctx context.Context) error { _, err := j.TagSummary(ctx, stream); return err },
		"renew node":  func(ctx context.Context) error { _, err := j.RenewNode(ctx, node); return err },
		"open node":   func(ctx context.Context) error { _, err := j.OpenNode(ctx, "other", time.Minute); return err },
		"acquire": func(ctx context.Context) error {
			_, err := j.Acquire(ctx, node, journal.Stream("account:x"), time.Second)
			return err
		},
	}
	for name, call := range calls {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		start := time.Now()
		err := call(cctx)
		cancel()
		require.ErrorIs(t, err, journal.ErrUnavailable, name)
		require.NotErrorIs(t, err, journal.ErrOutcomeUnknown, "%s: nothing reached the server", name)
		require.Less(t, time.Since(start), 10*time.Second, "%s failed before its deadline", name)
	}

	px.restore()
	res, err := j.Append(ctx, []journal.Event{event("C", stream.Tag)}, journal.AppendOptions{})
	require.NoError(t, err, "the same journal serves again")
	require.Equal(t, uint64(2), res.Records[0].Version(stream.Tag), "nothing of the outage was written")
	_, err = j.RenewNode(ctx, node)
	require.NoError(t, err)
}

// forward copies server messages to the client one by one.
func (p *proxy) forward(client, server net.Conn) {
	hdr := make([]byte, 5)
	for {
		if _, err := io.ReadFull(server, hdr); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[1:])) - 4
		if n < 0 {
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(server, body); err != nil {
			return
		}
		if hdr[0] == 'C' && string(body) == "COMMIT\x00" && p.dropCommit.CompareAndSwap(true, false) {
			return
		}
		if _, err := client.Write(append(hdr, body...)); err != nil {
			return
		}
	}
}

// TestFaultPooledConnectionClosedByPeer: a pooled connection whose server end
// was closed while it sat idle is found closed before anything is sent on it
// and replaced, so the append succeeds instead of ending in an unknown
// outcome (its COMMIT would have gone out with no answer).
func TestFaultPooledConnectionClosedByPeer(t *testing.T) {
	t.Parallel()
	px, pool, j, schema := proxiedJournalWith(t, postgres.BatchingConfig{}, func(c *pgxpool.Config) {
		c.MaxConns = 1
		// The pool's own check (a ping round trip before handing out a
		// connection idle for more than a second) is off, so this test sees
		// the journal's.
		c.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	})
	ctx := t.Context()
	stream := journal.Stream("account:dropped")
	// After a commit the journal sends a NOTIFY on a pooled connection: wait
	// for it, so that nothing but the appends below uses the pool.
	listener, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	defer listener.Close(context.Background())
	_, err = listener.Exec(ctx, "LISTEN "+pgx.Identifier{postgres.NotifyChannel(schema)}.Sanitize())
	require.NoError(t, err)
	_, err = j.Append(ctx, []journal.Event{event("A", stream.Tag)}, journal.AppendOptions{})
	require.NoError(t, err)
	_, err = listener.WaitForNotification(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return pool.Stat().IdleConns() == 1 }, 5*time.Second, time.Millisecond,
		"the pool's one connection is idle again")
	conn, err := pool.Acquire(ctx) // the one connection, A's
	require.NoError(t, err)
	nc := conn.Conn().PgConn().Conn()
	conn.Release()

	px.reset()
	require.Eventually(t, func() bool { return postgres.PeerClosed(nc) }, 5*time.Second, time.Millisecond,
		"the client's end of the pooled connection sees the close")
	res, err := j.Append(ctx, []journal.Event{event("B", stream.Tag)}, journal.AppendOptions{})
	require.NoError(t, err, "the append went out on a new connection")
	require.Equal(t, uint64(2), res.Records[0].Version(stream.Tag))
	require.Equal(t, int64(1), j.EngineStats().Discarded, "the closed connection was discarded")
}
