//go:build !nocluster

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/internal/throwawaypg"
)

// clusterFollowBound is how long after a move's end a request to any member
// may take: every member follows a move by itself within it.
const clusterFollowBound = 2 * time.Second

// clusterOp is one request of the cluster move test's load: a deposit or a
// transfer sent to one member with an Idempotency-Key, retried there with
// the same key until it gets a definite answer.
type clusterOp struct {
	node     int
	key      string
	kind     string // "deposit", "transfer" or "probe" (a deposit right after a move)
	amount   int64
	start    time.Time
	end      time.Time
	attempts int
	first    int // the first attempt's status (0: no answer)
	final    int // the last attempt's status (0: no answer)
	code     bank.Code
	firstErr string // the first attempt's answer when it was not a success
}

// answered reports whether the operation got a definite answer: a success,
// or a refusal for funds.
func (o *clusterOp) answered(status int) bool {
	return status == http.StatusOK || (status == http.StatusConflict && o.code == bank.CodeInsufficientFunds)
}

// clusterLoad sends deposits and transfers on accounts to the members.
type clusterLoad struct {
	clients  []*loadClient // one per member
	accounts []string
	mu       sync.Mutex
	ops      []*clusterOp
	run      atomic.Bool
	wg       sync.WaitGroup
}

// do sends op's request to its member until it gets a definite answer (for
// at most opPatience: the cut-over of a move answers retryable 503s for
// seconds on a loaded machine) and records it.
func (l *clusterLoad) do(ctx context.Context, op *clusterOp, path string, body any) {
	op.start = time.Now()
	for (op.attempts == 0 || time.Since(op.start) < opPatience) && ctx.Err() == nil {
		op.attempts++
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := l.clients[op.node].postKey(rctx, path, op.key, body)
		cancel()
		status := 0
		if err == nil {
			status, op.code = res.status, res.code
		}
		if op.attempts == 1 {
			op.first = status
			switch {
			case err != nil:
				op.firstErr = err.Error()
			case !op.answered(status):
				op.firstErr = strings.TrimSpace(string(res.body))
			}
		}
		op.final = status
		if status != 0 && status < 500 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond): // a client's pause before its retry
		}
	}
	op.end = time.Now()
	l.mu.Lock()
	l.ops = append(l.ops, op)
	l.mu.Unlock()
}

// start runs workers clients, spread over the members, until stop.
func (l *clusterLoad) start(ctx context.Context, workers int) {
	l.run.Store(true)
	for w := range workers {
		l.wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			for l.run.Load() && ctx.Err() == nil {
				op := &clusterOp{node: w % len(l.clients), key: randomHex(16), amount: 1 + rng.Int64N(40)}
				from := rng.IntN(len(l.accounts))
				if rng.IntN(4) == 0 {
					op.kind = "deposit"
					l.do(ctx, op, "/accounts/"+l.accounts[from]+"/deposit", map[string]any{"amount": op.amount})
					continue
				}
				to := (from + 1 + rng.IntN(len(l.accounts)-1)) % len(l.accounts)
				op.kind = "transfer"
				l.do(ctx, op, "/transfers", map[string]any{"from": l.accounts[from], "to": l.accounts[to], "amount": op.amount})
			}
		})
	}
}

// probe deposits 1 on every account through every member at once.
func (l *clusterLoad) probe(ctx context.Context) {
	for node := range l.clients {
		for _, id := range l.accounts {
			l.wg.Go(func() {
				l.do(ctx, &clusterOp{node: node, key: randomHex(16), kind: "probe", amount: 1}, "/accounts/"+id+"/deposit", map[string]any{"amount": 1})
			})
		}
	}
}

func (l *clusterLoad) stop() {
	l.run.Store(false)
	l.wg.Wait()
}

// since returns the finished operations that started at or after t.
func (l *clusterLoad) since(t time.Time) []*clusterOp {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*clusterOp
	for _, o := range l.ops {
		if !o.start.Before(t) {
			out = append(out, o)
		}
	}
	return out
}

// waitFor waits until at least n operations started at or after since have
// finished.
func (l *clusterLoad) waitFor(t *testing.T, ctx context.Context, since time.Time, n int) {
	t.Helper()
	for len(l.since(since)) < n {
		select {
		case <-ctx.Done():
			t.Fatalf("the load finished fewer than %d operations started after %s", n, since.Format("15:04:05.000"))
		case <-time.After(20 * time.Millisecond): // polling
		}
	}
}

// idempotencyKeysIn counts, per idempotency key, the events of partition
// stored in schema on the database at url.
func idempotencyKeysIn(t *testing.T, ctx context.Context, url, schema, partition string) map[string]int {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT metadata FROM `+pgx.Identifier{schema, "events"}.Sanitize()+` WHERE partition = $1`, partition)
	require.NoError(t, err)
	defer rows.Close()
	keys := map[string]int{}
	for rows.Next() {
		var raw []byte
		require.NoError(t, rows.Scan(&raw))
		var md struct {
			IdempotencyKey string `json:"idempotencyKey"`
		}
		require.NoError(t, json.Unmarshal(raw, &md))
		if md.IdempotencyKey != "" {
			keys[md.IdempotencyKey]++
		}
	}
	require.NoError(t, rows.Err())
	return keys
}

// TestPartitionMoveClusterEtcd runs the bank as a cluster of three processes
// that find each other through a real etcd (-cluster-etcd, the etcd
// provider), on two Postgres servers (-db, and -db2 holding partition
// "east"). Under load from clients spread over the three members (deposits
// and transfers on east's accounts with Idempotency-Keys, retried with the
// same key) it moves east from the second server to the first and back with
// `scribe partition move`. For each move:
//   - every member follows: every request made on any member after the
//     move's end (the load's, and one deposit per account and member sent
//     at the end) succeeds at its first attempt within clusterFollowBound;
//   - every acknowledged operation is stored exactly once, on the server
//     that now holds east, and the other holds nothing of east;
//   - every balance equals the fold of its events, and money is conserved;
//   - `scribe verify` exits 0 on both servers.
func TestPartitionMoveClusterEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, a second Postgres server and three bank processes, and builds cmd/scribe")
	}
	t.Parallel()
	etcd := startEtcd(t)
	_, schema := pgSchema(t)
	url1 := pgtest.URL(t)
	url2 := throwawaypg.Start(t).URL()
	bankBin := buildBinary(t)
	scribe := buildScribe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const members = 3
	name := "bank-" + schema
	ports := clusterPorts(t, members)
	args := func(i int) []string {
		return []string{"-addr", "127.0.0.1:0", "-db", url1, "-db2", url2, "-partition2", "east", "-schema", schema,
			"-node", fmt.Sprintf("bank-%d", i+1), "-cluster-name", name, "-cluster-port", fmt.Sprint(ports[i]),
			"-cluster-etcd", etcd.endpoints}
	}
	procs := make([]*process, members)
	procs[0] = startProcess(t, bankBin, args(0)...) // alone first: it migrates both databases
	var starting sync.WaitGroup
	for i := 1; i < members; i++ {
		starting.Go(func() { procs[i] = startProcess(t, bankBin, args(i)...) })
	}
	starting.Wait()
	for i, p := range procs {
		require.NotNil(t, p, "member %d started", i+1)
	}
	// Every member registered its key in etcd.
	prefix := "/scribe/" + name + "/"
	for {
		n, err := etcd.keys(ctx, prefix)
		require.NoError(t, err)
		if n == members {
			break
		}
		require.NoError(t, ctx.Err(), "%d of %d members registered under %s in etcd", n, members, prefix)
		time.Sleep(20 * time.Millisecond) // polling
	}

	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer hc.CloseIdleConnections()
	load := &clusterLoad{}
	for _, p := range procs {
		load.clients = append(load.clients, &loadClient{base: "http://" + p.addr, http: hc})
	}
	const accounts, initial = 8, 1000
	for i := range accounts {
		id := fmt.Sprintf("east-cm%d", i)
		load.accounts = append(load.accounts, id)
		c := load.clients[i%members]
		_, err := c.post(ctx, "/accounts", map[string]any{"id": id}, http.StatusCreated)
		require.NoError(t, err)
		_, err = c.post(ctx, "/accounts/"+id+"/deposit", map[string]any{"amount": initial}, http.StatusOK)
		require.NoError(t, err)
	}

	urls := map[string]string{"db": url1, "db2": url2}
	at := "db2"
	for i, to := range []string{"db", "db2"} {
		from, move := at, i+1
		began := time.Now()
		load.start(ctx, 2*members)
		// The load runs on the source first, so leases are held there when
		// the move's fence revokes them.
		load.waitFor(t, ctx, began, 40)
		out, code := runScribe(t, ctx, scribe, "partition", "move", "-from", urls[from], "-to", urls[to], "-schema", schema,
			"-partition", "east", "-to-name", to, "-batch", "100", "-confirm")
		require.Zero(t, code, "move %d (%s → %s): %s", move, from, to, out)
		require.Contains(t, out, "retire: done", "move %d", move)
		ended := time.Now()
		at = to
		load.probe(ctx)
		// The load goes on past the bound before it stops.
		load.waitFor(t, ctx, ended.Add(clusterFollowBound), 3*members)
		load.stop()

		after := load.since(ended)
		perNode := make([]int, members)
		var failed, slow []string
		for _, o := range after {
			perNode[o.node]++
			switch {
			case !o.answered(o.first):
				failed = append(failed, fmt.Sprintf("%s %s on bank-%d at %s (%s after the move's end): first attempt %d %s (%s); %d attempts, final %d",
					o.kind, o.key, o.node+1, o.start.Format("15:04:05.000"), o.start.Sub(ended).Round(time.Millisecond), o.first, o.code, o.firstErr, o.attempts, o.final))
			case o.end.Sub(o.start) > clusterFollowBound:
				slow = append(slow, fmt.Sprintf("%s %s on bank-%d took %s", o.kind, o.key, o.node+1, o.end.Sub(o.start).Round(time.Millisecond)))
			}
		}
		t.Logf("move %d (%s → %s): %d requests made after its end (per member %v): %d not answered at once, %d slower than %s",
			move, from, to, len(after), perNode, len(failed), len(slow), clusterFollowBound)
		require.Empty(t, failed, "move %d: requests made after the move's end that did not succeed at their first attempt", move)
		require.Empty(t, slow, "move %d: requests made after the move's end answered later than %s", move, clusterFollowBound)
		for node, n := range perNode {
			require.Positive(t, n, "move %d: bank-%d served requests after the move's end", move, node+1)
		}

		// Every acknowledged operation is stored exactly once, where east
		// is now; the other server holds nothing of east.
		stored := idempotencyKeysIn(t, ctx, urls[at], schema, "east")
		deposited := int64(accounts * initial)
		all := load.since(time.Time{})
		var retried int
		for _, o := range all {
			n := stored[o.key]
			if o.attempts > 1 {
				retried++
			}
			switch {
			case o.final == http.StatusOK:
				require.Equal(t, 1, n, "move %d: acknowledged %s %s (bank-%d) stored %d times", move, o.kind, o.key, o.node+1, n)
				if o.kind != "transfer" {
					deposited += o.amount
				}
			case o.answered(o.final):
				require.Zero(t, n, "move %d: %s %s refused for funds but stored", move, o.kind, o.key)
			default:
				t.Fatalf("move %d: %s %s on bank-%d got no definite answer in %d attempts over %s (last status %d %s)", move, o.kind, o.key, o.node+1, o.attempts, opPatience, o.final, o.code)
			}
		}
		for k, n := range stored {
			require.Equal(t, 1, n, "move %d: idempotency key %s stored %d times", move, k, n)
		}
		require.Zero(t, countEvents(t, ctx, urls[from], schema, "east"), "move %d: the source %s still holds east", move, from)

		// Every balance is the fold of its events, on every member, and the
		// money is what was deposited.
		var sum int64
		for _, id := range load.accounts {
			var balance int64
			for node, c := range load.clients {
				var view AccountView
				require.NoError(t, c.get(ctx, "/accounts/"+id, &view), "move %d: account %s on bank-%d", move, id, node+1)
				events, err := c.allEvents(ctx, id)
				require.NoError(t, err, "move %d: account %s's events on bank-%d", move, id, node+1)
				folded, _, err := foldEvents(events)
				require.NoError(t, err, "move %d: account %s", move, id)
				require.Equal(t, folded.Balance, view.Balance, "move %d: account %s on bank-%d: the balance is the fold of its events", move, id, node+1)
				if node == 0 {
					balance = view.Balance
				}
				require.Equal(t, balance, view.Balance, "move %d: account %s: bank-%d and bank-1 agree", move, id, node+1)
			}
			sum += balance
		}
		require.Equal(t, deposited, sum, "move %d: money conserved", move)

		for _, url := range []string{url1, url2} {
			out, code := runScribe(t, ctx, scribe, "-db", url, "-schema", schema, "verify")
			require.Zero(t, code, "move %d: scribe verify on %s: %s", move, url, out)
		}
		for i, p := range procs {
			require.Empty(t, unknownRaces(t, p.log()), "bank-%d: data races", i+1)
		}
		t.Logf("move %d (%s → %s): %d operations so far (%d retried), %d keys stored on %s, %d of money", move, from, to, len(all), retried, len(stored), at, sum)
	}
}

// knownRaces name the data races a member built with -race may report
// that are protoactor-go's own, whatever the provider: a report whose two
// accesses' stacks hold one of these frames and no frame of Scribe's is
// tolerated (and counted); every other report fails the test.
var knownRaces = []string{
	// remote.BlockList hands out its set (BlockedMembers) without its lock
	// while a gossiped topology adds to it (Block); the set itself
	// (gofun's ImmutableSet) is read and cloned in the same race.
	"protoactor-go/remote.(*BlockList)",
	"gofun/set.(*ImmutableSet",
	// The gossip informer updates its state (setKey) while the remote
	// endpoint writer serializes the same state to send it.
	"protoactor-go/cluster.(*Informer)",
	// A cluster provider's topology update (UpdateClusterTopology, which
	// the etcd provider calls from its watch, as protoactor's own providers
	// do) writes the member list while the gossip actor reads it.
	"protoactor-go/cluster.(*MemberList)",
}

// unknownRaces returns the race detector's reports in a member's log other
// than knownRaces; it logs how many known ones it saw. A report is known when
// the code at both of its accesses (the first frame of each stack) is one
// of knownRaces: Scribe code further down a stack only called into
// protoactor-go. A report with Scribe code at an access is never known.
func unknownRaces(t *testing.T, log string) []string {
	t.Helper()
	const header = "WARNING: DATA RACE"
	var unknown []string
	known := map[string]int{}
	for _, r := range strings.Split(log, header)[1:] {
		r, _, _ = strings.Cut(r, "==================")
		// The two accesses' stacks, without where their goroutines started.
		accesses, _, _ := strings.Cut(r, "\nGoroutine ")
		kind := ""
		tops := raceAccessFrames(accesses)
		for _, top := range tops {
			k := ""
			for _, c := range knownRaces {
				if strings.Contains(top, c) {
					k = c
				}
			}
			if k == "" || strings.Contains(top, "github.com/scribe-es/scribe/") {
				kind = ""
				break
			}
			kind = k
		}
		if len(tops) < 2 || kind == "" {
			unknown = append(unknown, header+r)
			continue
		}
		known[kind]++
	}
	if len(known) > 0 {
		t.Logf("known data races of protoactor-go (not Scribe's): %v", known)
	}
	return unknown
}

// raceAccessFrames returns the first stack frame of each access of a race
// report ("Read at …", "Previous write at …"): the code that touched the
// memory.
func raceAccessFrames(report string) []string {
	var tops []string
	lines := strings.Split(report, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if (strings.HasPrefix(l, "Read at ") || strings.HasPrefix(l, "Write at ") ||
			strings.HasPrefix(l, "Previous read at ") || strings.HasPrefix(l, "Previous write at ")) && i+1 < len(lines) {
			tops = append(tops, strings.TrimSpace(lines[i+1]))
		}
	}
	return tops
}
