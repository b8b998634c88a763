package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/internal/throwawaypg"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// rewindLog keeps the ERROR records of detected store rewinds and passes
// everything on.
type rewindLog struct {
	slog.Handler
	mu   *sync.Mutex
	lost *map[string]uint64 // stream -> lost versions reported
	n    *int
}

func (h rewindLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError && strings.HasPrefix(r.Message, "the store lost acknowledged events") {
		var stream string
		var lost uint64
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "stream":
				stream = a.Value.String()
			case "lost_versions":
				lost = a.Value.Uint64()
			}
			return true
		})
		h.mu.Lock()
		(*h.lost)[stream] += lost
		*h.n++
		h.mu.Unlock()
	}
	return h.Handler.Handle(ctx, r)
}

func (h rewindLog) WithAttrs(as []slog.Attr) slog.Handler {
	return rewindLog{h.Handler.WithAttrs(as), h.mu, h.lost, h.n}
}

func (h rewindLog) WithGroup(n string) slog.Handler {
	return rewindLog{h.Handler.WithGroup(n), h.mu, h.lost, h.n}
}

// failoverLoad drives deposits of 1 with fresh Idempotency-Keys at a few
// accounts and records every answer.
type failoverLoad struct {
	url      string
	accounts []string
	hc       *http.Client

	mu        sync.Mutex
	acked     map[string]string // key -> account: answered 200
	unsettled map[string]string // key -> account: answered 503 and never 200 yet
	bad       []string          // answers other than 200 and 503 with Retry-After
	codes     map[string]int    // the error codes of the 503s
	afterAck  atomic.Int64      // unix nanos of the first 200 after mark was set
	mark      atomic.Int64      // unix nanos; 0 while unset
	stop      chan struct{}
	wg        sync.WaitGroup
}

type depositReply struct {
	status   int
	replayed bool
	body     string
}

func (l *failoverLoad) deposit(account, key string) depositReply {
	req, _ := http.NewRequest("POST", l.url+"/accounts/"+account+"/deposit", strings.NewReader(`{"amount":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := l.hc.Do(req)
	if err != nil {
		return depositReply{body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	r := depositReply{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true", body: string(b)}
	if r.status == 503 && resp.Header.Get("Retry-After") == "" {
		r.status = -1
		r.body = "503 without Retry-After: " + r.body
	}
	return r
}

func (l *failoverLoad) start(workers int) {
	l.stop = make(chan struct{})
	for w := range workers {
		l.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				account := l.accounts[(w+i)%len(l.accounts)]
				key := fmt.Sprintf("w%d-%d", w, i)
				r := l.deposit(account, key)
				l.mu.Lock()
				switch r.status {
				case 200:
					l.acked[key] = account
					delete(l.unsettled, key)
					if l.mark.Load() != 0 {
						l.afterAck.CompareAndSwap(0, time.Now().UnixNano())
					}
				case 503:
					l.unsettled[key] = account
					var body struct{ Code string }
					_ = json.Unmarshal([]byte(r.body), &body)
					l.codes[body.Code]++
				default:
					l.bad = append(l.bad, fmt.Sprintf("key %s: %d %s", key, r.status, r.body))
				}
				l.mu.Unlock()
				if r.status != 200 {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
}

func (l *failoverLoad) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

func (l *failoverLoad) finish(t *testing.T) {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Empty(t, l.bad, "only 200 or 503 with Retry-After: no 500, no false conflict")
}

// settle retries every key answered 503 with the same key until it answers
// 200, and returns the keys (with their accounts) the store holds now.
func (l *failoverLoad) settle(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, account := range l.unsettled {
		var r depositReply
		for range 100 {
			if r = l.deposit(account, key); r.status == 200 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		require.Equal(t, 200, r.status, "key %s settles: %s", key, r.body)
		l.acked[key] = account
	}
	l.unsettled = map[string]string{}
}

// storedKeys reads every account's stream from the database at url and
// returns its deposits' idempotency keys, counted, and each stream's version;
// it verifies each stream's hash chain. It may run while deposits go on.
func storedKeys(t *testing.T, url string, accounts []string) (map[string]int, map[string]uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	j, err := postgres.NewJournal(pool, postgres.Config{Schema: "bank"})
	require.NoError(t, err)
	defer j.Close()
	keys, versions := map[string]int{}, map[string]uint64{}
	for _, id := range accounts {
		stream := journal.StreamID{Partition: journal.DefaultPartition, Tag: bank.AccountTag(id)}
		for rec, err := range j.ReadStream(ctx, stream, 1, 0) {
			require.NoError(t, err)
			if rec.Type == bank.TypeMoneyDeposited {
				keys[rec.Metadata.IdempotencyKey]++
			}
			versions[id] = rec.Version(stream.Tag)
		}
		n, err := journal.VerifyStream(ctx, j, stream)
		require.NoError(t, err, "chain of %s verifies", id)
		require.GreaterOrEqual(t, n, versions[id], "the chain covers what was read (deposits may have followed)")
	}
	return keys, versions
}

// failoverBank starts a primary (with settings), its standby, and the bank on
// a multi-host URL naming both (target_session_attrs=read-write), with a
// log that records the rewinds reported.
type failoverBank struct {
	primary, standby *throwawaypg.Server
	ts               *testServer
	load             *failoverLoad
	url              string
	mu               sync.Mutex
	reported         map[string]uint64
	reports          int
}

func startFailoverBank(t *testing.T, sessionTimeout time.Duration, synchronous bool) *failoverBank {
	t.Helper()
	primary := throwawaypg.Start(t)
	standby := primary.StartStandby(t)
	if synchronous {
		makeSynchronous(t, primary.URL())
	}
	fb := &failoverBank{primary: primary, standby: standby, reported: map[string]uint64{}}
	fb.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/test?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.Port(), standby.Port())
	log := slog.New(rewindLog{testLogger(t).Handler(), &fb.mu, &fb.reported, &fb.reports})
	fb.ts = startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: "failover", Logger: log, DatabaseURL: fb.url, Schema: "bank", SessionTimeout: sessionTimeout})
	accounts := []string{"ada", "bob", "cy"}
	for _, id := range accounts {
		r := fb.ts.request("POST", "/accounts", `{"id":"`+id+`"}`)
		require.Equal(t, 201, r.Status, string(r.Body))
	}
	fb.load = &failoverLoad{url: fb.ts.url, accounts: accounts, hc: &http.Client{Timeout: 20 * time.Second},
		acked: map[string]string{}, unsettled: map[string]string{}, codes: map[string]int{}}
	t.Cleanup(fb.load.hc.CloseIdleConnections)
	return fb
}

// makeSynchronous makes every commit on the primary at url wait for its
// standby (synchronous_standby_names = '*'), and waits until the standby is
// synchronous.
func makeSynchronous(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '*'")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "SELECT pg_reload_conf()")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'").Scan(&n)
		return err == nil && n == 1
	}, 20*time.Second, 20*time.Millisecond, "the standby is synchronous")
}

// promote promotes the standby and waits (bounded, loosely) until a deposit
// is acknowledged again; it returns how long that took from the promotion.
func (fb *failoverBank) promote(t *testing.T) time.Duration {
	t.Helper()
	fb.standby.Promote()
	promoted := time.Now()
	fb.load.mark.Store(promoted.UnixNano())
	require.Eventually(t, func() bool { return fb.load.afterAck.Load() != 0 }, 90*time.Second, 10*time.Millisecond, "serves again on its own after the promotion")
	return time.Duration(fb.load.afterAck.Load() - promoted.UnixNano())
}

// requireBalances checks every account through the bank (its actor): the
// balance is the number of distinct acknowledged keys, the version one more.
func (fb *failoverBank) requireBalances(t *testing.T) {
	t.Helper()
	per := map[string]int64{}
	for _, account := range fb.load.acked {
		per[account]++
	}
	for _, id := range fb.load.accounts {
		requireAccount(t, fb.ts.request("GET", "/accounts/"+id, ""), 200, id, per[id], uint64(1+per[id]))
	}
}

// TestFailoverSynchronousStandby runs the bank on a primary with a
// synchronous standby behind a multi-host URL, stops the primary at once
// under load and promotes the standby: in-flight deposits end as 503
// (outcome unknown or unavailable), never 500 or a conflict; the bank serves
// again on its own; no acknowledged deposit is lost, none is applied twice
// (every key is stored once after the 503s are retried with their keys), no
// rewind is reported, and every chain verifies.
func TestFailoverSynchronousStandby(t *testing.T) {
	t.Parallel()
	fb := startFailoverBank(t, 10*time.Second, true)
	fb.load.start(4)
	require.Eventually(t, func() bool { return fb.load.ackedCount() >= 100 }, 30*time.Second, 5*time.Millisecond)

	fb.primary.Stop()
	took := fb.promote(t)
	require.Eventually(t, func() bool { return fb.ts.request("GET", "/readyz", "").Status == 200 }, 30*time.Second, 10*time.Millisecond)
	fb.load.finish(t)
	fb.load.settle(t)

	keys, _ := storedKeys(t, fb.url, fb.load.accounts)
	for key := range fb.load.acked {
		require.Equal(t, 1, keys[key], "acknowledged key %s stored exactly once", key)
	}
	require.Len(t, keys, len(fb.load.acked), "nothing stored that was not acknowledged in the end")
	fb.requireBalances(t)
	fb.mu.Lock()
	require.Zero(t, fb.reports, "a synchronous standby loses nothing: no rewind reported")
	fb.mu.Unlock()
	require.Equal(t, uint64(0), fb.ts.srv.svc.rt.Rewinds().LostVersions)
	t.Logf("synchronous failover: served again %s after the promotion; %d deposits acknowledged, 0 lost, none applied twice; 503s by code: %v",
		took.Round(time.Millisecond), len(fb.load.acked), fb.load.codes)
}

// TestFailoverAsynchronousStandby runs the bank on a primary with an
// asynchronous standby, stops the standby, keeps depositing on the primary
// (acknowledged deposits the standby never receives), stops the primary at
// once and promotes the standby: those deposits are lost. The bank must
// serve again within seconds without a 500 or an endless version-mismatch
// loop; report each rewound stream once with the lost versions (ERROR log,
// metric summary, /readyz degraded) exactly as many as were lost; and a
// retry of every acknowledged deposit with its Idempotency-Key must leave
// each key applied exactly once: the lost ones decided again (not replayed
// from a cache), the kept ones answered as before. "session expired": the
// primary stays down past the node session timeout before the promotion,
// so the runtime reloads every stream after opening a new session; the loss
// must be reported all the same.
func TestFailoverAsynchronousStandby(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		session time.Duration
		down    time.Duration
	}{
		{"session alive", 20 * time.Second, 0},
		{"session expired", 2 * time.Second, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := startFailoverBank(t, tc.session, false)
			fb.load.start(4)
			require.Eventually(t, func() bool { return fb.load.ackedCount() >= 60 }, 30*time.Second, 5*time.Millisecond)

			// The standby stops receiving; what is acknowledged from now
			// on exists on the primary only.
			fb.standby.Stop()
			before := fb.load.ackedCount()
			require.Eventually(t, func() bool { return fb.load.ackedCount() >= before+60 }, 30*time.Second, 5*time.Millisecond)
			fb.primary.Stop()
			if tc.down > 0 {
				time.Sleep(tc.down) // the node session expires meanwhile
			}
			fb.standby.Start()
			took := fb.promote(t)

			// What the promoted standby holds of the acknowledged deposits
			// (deposits acknowledged from now on are stored there).
			fb.load.mu.Lock()
			acked := make(map[string]string, len(fb.load.acked))
			for k, a := range fb.load.acked {
				acked[k] = a
			}
			fb.load.mu.Unlock()
			keys, _ := storedKeys(t, fb.url, fb.load.accounts)
			lost := map[string]uint64{}
			var lostKeys []string
			for key, account := range acked {
				if keys[key] == 0 {
					lost[string(bank.AccountTag(account))]++
					lostKeys = append(lostKeys, key)
				}
			}
			require.NotEmpty(t, lostKeys, "the asynchronous standby lost acknowledged deposits")

			// Every stream that lost deposits is reported once the load
			// reaches it, with as many versions as it lost.
			reported := func() map[string]uint64 {
				fb.mu.Lock()
				defer fb.mu.Unlock()
				r := map[string]uint64{}
				for s, n := range fb.reported {
					r[strings.TrimPrefix(s, journal.DefaultPartition+"/")] = n
				}
				return r
			}
			require.Eventually(t, func() bool { return len(reported()) >= len(lost) }, 30*time.Second, 10*time.Millisecond, "every rewound stream reported")
			fb.load.finish(t)
			require.Equal(t, lost, reported(), "lost versions reported per stream")
			var total uint64
			for _, n := range lost {
				total += n
			}
			sum := fb.ts.srv.svc.rt.Rewinds()
			require.Equal(t, total, sum.LostVersions)
			ready := fb.ts.request("GET", "/readyz", "")
			require.Equal(t, 200, ready.Status, string(ready.Body))
			require.Equal(t, "degraded", ready.json(t)["status"], string(ready.Body))

			// Retry every acknowledged deposit with its key: the lost ones
			// are applied again (once), the kept ones are not.
			fb.load.settle(t)
			for _, key := range lostKeys {
				r := fb.load.deposit(fb.load.acked[key], key)
				require.Equal(t, 200, r.status, r.body)
				require.False(t, r.replayed, "a lost deposit is decided again, not replayed from memory")
			}
			for key, account := range fb.load.acked {
				r := fb.load.deposit(account, key)
				require.Equal(t, 200, r.status, "retry of %s: %s", key, r.body)
			}
			keys, _ = storedKeys(t, fb.url, fb.load.accounts)
			for key := range fb.load.acked {
				require.Equal(t, 1, keys[key], "acknowledged key %s stored exactly once after its retry", key)
			}
			require.Len(t, keys, len(fb.load.acked))
			fb.requireBalances(t)
			t.Logf("asynchronous failover (%s): served again %s after the promotion; %d deposits acknowledged, %d lost (%v), reported %d versions in %d ERROR lines; 503s by code: %v; /readyz: %s",
				tc.name, took.Round(time.Millisecond), len(fb.load.acked), len(lostKeys), lost, sum.LostVersions, fb.reports, fb.load.codes, ready.Body)
		})
	}
}
