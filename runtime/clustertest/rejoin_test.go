package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rejoinAccounts are the accounts of the rejoin tests.
func rejoinAccounts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("rj-%02d", i)
	}
	return out
}

// ledgerBook is what the test knows the accounts hold: every acknowledged
// command, and the balance each account must have.
type ledgerBook struct {
	load    *ledgerLoad
	balance map[string]int64
	keys    atomic.Int64
}

func newLedgerBook(procs []*proc, accounts []string) *ledgerBook {
	l := newLedgerLoad(procs, 0, 5*time.Second)
	l.accounts = accounts
	return &ledgerBook{load: l, balance: map[string]int64{}}
}

// depositVia deposits amount on every account through the members via (any
// of them, moving on after a retryable answer) until each is acknowledged.
func (b *ledgerBook) depositVia(t *testing.T, via []*proc, amount int64) {
	t.Helper()
	l := &ledgerLoad{procs: via, hc: b.load.hc, avoid: map[int]bool{}}
	for i, a := range b.load.accounts {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		o, err := l.deliver(ctx, i, execRequest{Account: a, Op: "deposit", Amount: amount, Key: fmt.Sprintf("book-%d", b.keys.Add(1))})
		cancel()
		require.NoError(t, err)
		require.True(t, o.acked)
		b.record(o)
	}
}

func (b *ledgerBook) record(o outcome) {
	b.load.mu.Lock()
	b.load.outcomes = append(b.load.outcomes, o)
	b.load.mu.Unlock()
	b.balance[o.account] += o.amount
}

// serveAgain sends a deposit of 1 on every account to member p alone,
// again and again, until p has acknowledged one on each or bound passes.
// Every acknowledgement must carry the balance the book expects (the
// writes of the other members included): nothing stale. It returns the
// time from since until p had served every account, and the codes of the
// 503 answers, by code.
func (b *ledgerBook) serveAgain(t *testing.T, p *proc, since time.Time, bound time.Duration) (time.Duration, map[string]int) {
	t.Helper()
	served := map[string]bool{}
	pending := map[string]string{} // an account's key whose outcome is not known yet
	codes := map[string]int{}
	deadline := time.Now().Add(bound)
	for i := 0; len(served) < len(b.load.accounts); i++ {
		require.True(t, time.Now().Before(deadline), "member %s did not serve every account within %s (served %d of %d; 503 answers: %v)", p.name, bound, len(served), len(b.load.accounts), codes)
		require.True(t, p.alive(), "member %s exited (code %d) instead of rejoining", p.name, p.exitCode)
		a := b.load.accounts[i%len(b.load.accounts)]
		if served[a] {
			continue
		}
		key, ok := pending[a]
		if !ok {
			key = fmt.Sprintf("again-%d", b.keys.Add(1))
			pending[a] = key
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rep, status, err := p.exec(ctx, b.load.hc, execRequest{Account: a, Op: "deposit", Amount: 1, Key: key})
		cancel()
		switch {
		case err == nil && status == http.StatusOK:
			want := b.balance[a] + 1
			require.Equal(t, want, rep.Balance, "account %s: member %s answered from a stale state", a, p.name)
			served[a] = true
			delete(pending, a)
			b.record(outcome{account: a, key: key, amount: 1, version: rep.Version, acked: true})
		case err == nil && status == http.StatusServiceUnavailable:
			codes[rep.Code]++
			time.Sleep(20 * time.Millisecond) // polling
		case err != nil:
			codes["transport"]++
			time.Sleep(20 * time.Millisecond) // polling
		default:
			t.Fatalf("member %s answered %d %s on account %s: %s", p.name, status, rep.Code, a, rep.Error)
		}
	}
	return time.Since(since), codes
}

// accountsOf returns the accounts whose streams member p hosts, as p sees it.
func accountsOf(t *testing.T, p *proc, accounts []string) []string {
	t.Helper()
	var out []string
	for _, a := range accounts {
		resp, err := http.Get(p.httpAddr + "/owner?account=" + url.QueryEscape(a))
		require.NoError(t, err)
		var o ownerReply
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&o))
		_ = resp.Body.Close()
		if o.Owner == o.Self {
			out = append(out, a)
		}
	}
	return out
}

// logOf returns the member's log so far.
func logOf(t *testing.T, p *proc) string {
	t.Helper()
	b, err := os.ReadFile(p.stderr)
	require.NoError(t, err)
	return string(b)
}

// requireRejoinedOnce checks that the member logged leaving the cluster once
// and rejoining once.
func requireRejoinedOnce(t *testing.T, p *proc) {
	t.Helper()
	log := logOf(t, p)
	require.Equal(t, 1, strings.Count(log, "member left the cluster; rejoining"), "one warning when it left:\n%s", log)
	require.Equal(t, 1, strings.Count(log, "member rejoined the cluster"), "one line when it rejoined:\n%s", log)
	require.NotContains(t, log, "fenced for good")
}

// requireHosts checks that member p hosts some of the accounts.
func requireHosts(t *testing.T, p *proc) {
	t.Helper()
	s, err := p.stats()
	require.NoError(t, err)
	require.Positive(t, s.Active, "member %s hosts some of the accounts", p.name)
}

// A member SIGSTOPped past its session timeout, then SIGCONTed, serves
// commands again on its own: the other member takes its accounts over and
// writes to every one of them meanwhile; once resumed, the paused member
// rejoins with a new incarnation and every one of its answers reflects the
// other member's writes (no stale answer, no rejection decided on a stale
// balance), and its answers before it served are 503s.
func TestProcessesPausedMemberRejoins(t *testing.T) {
	t.Parallel()
	url, schema, j := openVerifier(t)
	procs := startProcs(t, 2, url, schema)
	book := newLedgerBook(procs, rejoinAccounts(8))
	book.depositVia(t, procs, 100)
	paused := procs[1]
	requireHosts(t, paused)

	require.NoError(t, paused.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	require.True(t, waitMembers(procs[0], 1, 30*time.Second), "the other member drops the paused one")
	// Acknowledged only once the paused member's node session expired in
	// the database (its accounts' leases lapse with it).
	book.depositVia(t, procs[:1], 10)
	t.Logf("the other member served every account %s after SIGSTOP", time.Since(stopped).Round(time.Millisecond))

	require.NoError(t, paused.cmd.Process.Signal(syscall.SIGCONT))
	resumed := time.Now()
	took, codes := book.serveAgain(t, paused, resumed, 30*time.Second)
	t.Logf("the resumed member served every account %s after SIGCONT (paused %s); 503 answers before: %v",
		took.Round(time.Millisecond), resumed.Sub(stopped).Round(time.Millisecond), codes)
	for code := range codes {
		require.Contains(t, []string{"lease_lost", "retryable", "transport"}, code, "answers while out are retryable")
	}
	for _, p := range procs {
		require.True(t, waitMembers(p, 2, 30*time.Second), "member %s sees both members", p.name)
	}
	s, err := paused.stats()
	require.NoError(t, err)
	require.Empty(t, s.NotReady, "the rejoined member is ready")
	requireRejoinedOnce(t, paused)
	book.depositVia(t, procs, 1) // both serve
	book.load.verify(t, j)
	checkRaces(t, procs)
}

// A member cut off from the database longer than its session timeout (its
// connections go through a proxy the test cuts) answers lease_lost and is
// not ready meanwhile; once the cut heals it rejoins with a new incarnation
// on its own and serves the current state.
func TestProcessesCutOffMemberRejoins(t *testing.T) {
	t.Parallel()
	dbURL, schema, j := openVerifier(t)
	px := startDBProxy(t, dbURL)
	cfgs := procConfigs(t, 2, dbURL, schema)
	cfgs[1].DB = px.url
	procs := startConfigs(t, cfgs, 2)
	book := newLedgerBook(procs, rejoinAccounts(8))
	book.depositVia(t, procs, 100)
	cut := procs[1]
	mine := accountsOf(t, cut, book.load.accounts)
	require.NotEmpty(t, mine, "member %s hosts some of the accounts", cut.name)

	px.cut()
	cutAt := time.Now()
	// Hold the cut for twice the session timeout: the member's node session
	// expires in the database. It stays in the topology (its peers still
	// reach it), so it keeps hosting its accounts and must refuse them.
	codes := map[string]int{}
	notReady := ""
	for time.Since(cutAt) < 2*procSessionTimeout {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rep, status, err := cut.exec(ctx, book.load.hc, execRequest{Account: mine[0], Op: "deposit", Amount: 1, Key: fmt.Sprintf("cut-%d", time.Now().UnixNano())})
		cancel()
		require.NoError(t, err)
		require.NotEqual(t, http.StatusOK, status, "nothing is acknowledged without the database: %s", rep.Error)
		require.Equal(t, http.StatusServiceUnavailable, status, rep.Error)
		codes[rep.Code]++
		if s, err := cut.stats(); err == nil && s.NotReady != "" {
			notReady = s.NotReady
		}
		time.Sleep(100 * time.Millisecond) // polling
	}
	t.Logf("answers during the cut: %v; not ready: %s", codes, notReady)
	require.Positive(t, codes["lease_lost"], "a member that cannot confirm its session answers lease_lost")
	require.NotEmpty(t, notReady, "not ready during the cut")

	px.restore()
	healed := time.Now()
	took, before := book.serveAgain(t, cut, healed, 30*time.Second)
	t.Logf("the cut-off member served every account %s after the cut healed (cut %s); 503 answers before: %v",
		took.Round(time.Millisecond), healed.Sub(cutAt).Round(time.Millisecond), before)
	for _, p := range procs {
		require.True(t, waitMembers(p, 2, 30*time.Second), "member %s sees both members", p.name)
	}
	requireRejoinedOnce(t, cut)
	book.depositVia(t, procs, 1)
	book.load.verify(t, j)
	checkRaces(t, procs)
}

// A second live process with a member's node ID (a twin) still keeps the
// older one out for good: it does not rejoin, it reports the twin, and
// exits as fenced, while the others serve.
func TestProcessesTwinStaysOut(t *testing.T) {
	t.Parallel()
	url, schema, j := openVerifier(t)
	cfgs := procConfigs(t, 3, url, schema)
	cfgs[2].NodeID = cfgs[1].NodeID // the twin
	procs := startConfigs(t, cfgs[:2], 2)
	book := newLedgerBook(procs, rejoinAccounts(4))
	book.depositVia(t, procs, 100)
	older := procs[1]

	twin := startConfigs(t, cfgs[2:], -1)[0]
	select {
	case <-older.fenced:
	case <-time.After(30 * time.Second):
		t.Fatalf("the older twin was not fenced within 30s")
	}
	select {
	case <-older.exited:
		require.Equal(t, exitFenced, older.exitCode)
	case <-time.After(30 * time.Second):
		t.Fatalf("the older twin did not exit")
	}
	log := logOf(t, older)
	require.Contains(t, log, "fenced for good")
	require.Contains(t, log, "another live process")
	require.NotContains(t, log, "member rejoined the cluster")
	live := []*proc{procs[0], twin}
	for _, p := range live {
		require.True(t, waitMembers(p, 2, 30*time.Second), "member %s sees the two live members", p.name)
	}
	book.depositVia(t, live, 1)
	book.load.verify(t, j)
	checkRaces(t, append(live, older))
}

// dbProxy forwards TCP connections to Postgres until cut: then it closes
// the open ones and refuses new ones, until restore.
type dbProxy struct {
	url   string // the database URL through the proxy
	ln    net.Listener
	down  atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startDBProxy(t *testing.T, dbURL string) *dbProxy {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u.Host = ln.Addr().String()
	p := &dbProxy{url: u.String(), ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.down.Load() {
				_ = c.Close()
				continue
			}
			s, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer p.wg.Done()
				_, _ = io.Copy(dst, src)
				_ = dst.Close()
				_ = src.Close()
			}
			go pipe(s, c)
			go pipe(c, s)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *dbProxy) cut() {
	p.down.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *dbProxy) restore() { p.down.Store(false) }
