package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/internal/throwawaypg"
)

// afterMoveBound is how long after a move's end every request may take: the
// issue's bound for a live node to follow a move.
const afterMoveBound = 2 * time.Second

// opPatience is how long a move test's client retries one operation with
// its Idempotency-Key before it counts it as undecided: the cut-over of a
// move answers retryable 503s for seconds on a loaded machine (from the
// fence to the switch), and a client with a deadline waits it out.
const opPatience = 60 * time.Second

// moveOp is one request of the move test's load: a deposit or a transfer,
// sent with an Idempotency-Key and retried with the same key until it gets
// a definite answer.
type moveOp struct {
	key      string
	kind     string // "deposit" or "transfer"
	amount   int64
	start    time.Time
	end      time.Time
	attempts int
	first    int // status of the first attempt (0: no answer)
	final    int // status of the last attempt (0: no answer)
	code     bank.Code
	body     string // the first attempt's answer when it failed
}

// ok reports a definite success (or a definite refusal for funds, which is an
// answer, not a failure).
func (o *moveOp) ok() bool {
	return o.final == http.StatusOK || (o.final == http.StatusConflict && o.code == bank.CodeInsufficientFunds)
}

// moveLoad drives deposits and transfers on accounts until stopped.
type moveLoad struct {
	c        *loadClient
	accounts []string
	mu       sync.Mutex
	ops      []*moveOp
	run      atomic.Bool
	wg       sync.WaitGroup
}

func (l *moveLoad) start(ctx context.Context, workers int) {
	l.run.Store(true)
	for w := range workers {
		l.wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			for l.run.Load() && ctx.Err() == nil {
				op := &moveOp{key: randomHex(16), amount: 1 + rng.Int64N(40), start: time.Now()}
				var path string
				var body any
				from := rng.IntN(len(l.accounts))
				if rng.IntN(5) == 0 {
					op.kind, path, body = "deposit", "/accounts/"+l.accounts[from]+"/deposit", map[string]any{"amount": op.amount}
				} else {
					to := (from + 1 + rng.IntN(len(l.accounts)-1)) % len(l.accounts)
					op.kind, path, body = "transfer", "/transfers", map[string]any{"from": l.accounts[from], "to": l.accounts[to], "amount": op.amount}
				}
				for (op.attempts == 0 || time.Since(op.start) < opPatience) && ctx.Err() == nil {
					op.attempts++
					rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					res, err := l.c.postKey(rctx, path, op.key, body)
					cancel()
					status := 0
					if err == nil {
						status, op.code = res.status, res.code
					}
					if op.attempts == 1 {
						op.first = status
						if err != nil {
							op.body = err.Error()
						} else if status >= 500 {
							op.body = string(res.body)
						}
					}
					op.final = status
					if status != 0 && status < 500 {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				op.end = time.Now()
				l.mu.Lock()
				l.ops = append(l.ops, op)
				l.mu.Unlock()
			}
		})
	}
}

func (l *moveLoad) stop() {
	l.run.Store(false)
	l.wg.Wait()
}

// since returns the operations that started at or after t.
func (l *moveLoad) since(t time.Time) []*moveOp {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*moveOp
	for _, o := range l.ops {
		if !o.start.Before(t) {
			out = append(out, o)
		}
	}
	return out
}

// TestPartitionMoveBankThereAndBack moves the bank's partition "east" from
// the second server to the first, back, and there again (B→A→B→A is the
// same three moves seen from the other side) with `scribe partition move`
// while clients make deposits and transfers on east's accounts with
// Idempotency-Keys, retrying with the same key. For each move:
//   - every request made after the move's end is answered with success (or
//     a refusal for funds) at its first attempt, within afterMoveBound: the
//     live bank follows the move by itself, no request fails or times out;
//   - every acknowledged operation is stored exactly once, on the server
//     that now holds east, and the other holds none of it;
//   - the bank's read model (GET /accounts) equals the accounts' own state
//     and money is conserved;
//   - `scribe verify` exits 0 on both servers.
func TestPartitionMoveBankThereAndBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second Postgres server and builds cmd/scribe")
	}
	_, schema := pgSchema(t)
	url1 := pgtest.URL(t)
	url2 := throwawaypg.Start(t).URL()
	bin := buildScribe(t)
	ts := startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: "there-and-back", Logger: testLogger(t),
		DatabaseURL: url1, Schema: schema, SecondDatabaseURL: url2, SecondPartition: "east"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	c := &loadClient{base: ts.url, http: &http.Client{Timeout: 30 * time.Second}}
	const accounts, initial = 8, 1000
	load := &moveLoad{c: c}
	for i := range accounts {
		id := fmt.Sprintf("east-tb%d", i)
		load.accounts = append(load.accounts, id)
		_, err := c.post(ctx, "/accounts", map[string]any{"id": id}, http.StatusCreated)
		require.NoError(t, err)
		_, err = c.post(ctx, "/accounts/"+id+"/deposit", map[string]any{"amount": initial}, http.StatusOK)
		require.NoError(t, err)
	}

	urls := map[string]string{"db": url1, "db2": url2}
	at := "db2"
	for i, to := range []string{"db", "db2", "db"} {
		from := at
		load.start(ctx, 4)
		// Let the load run on the source first, so leases are held there
		// when the fence revokes them.
		waitOps(t, ctx, load, time.Now(), 50)
		out, code := runScribe(t, ctx, bin, "partition", "move", "-from", urls[from], "-to", urls[to], "-schema", schema,
			"-partition", "east", "-to-name", to, "-batch", "100", "-confirm")
		require.Zero(t, code, "move %d (%s → %s): %s", i+1, from, to, out)
		require.Contains(t, out, "retire: done", "move %d", i+1)
		require.NotContains(t, out, "resumed", "move %d is a new move, not the resume of an earlier one", i+1)
		ended := time.Now()
		at = to
		// Keep the load going past the bound, then stop it.
		waitOps(t, ctx, load, ended.Add(afterMoveBound), 100)
		load.stop()

		after := load.since(ended)
		require.NotEmpty(t, after)
		var slow, failed []string
		for _, o := range after {
			switch {
			case o.first != http.StatusOK && !(o.first == http.StatusConflict && o.code == bank.CodeInsufficientFunds):
				failed = append(failed, fmt.Sprintf("%s %s at %s (%s after the move's end): first attempt %d (%s: %s), %d attempts, final %d",
					o.kind, o.key, o.start.Format("15:04:05.000"), o.start.Sub(ended), o.first, o.code, o.body, o.attempts, o.final))
			case o.end.Sub(o.start) > afterMoveBound:
				slow = append(slow, fmt.Sprintf("%s %s took %s", o.kind, o.key, o.end.Sub(o.start)))
			}
		}
		require.Empty(t, failed, "move %d: requests made after the move's end that did not succeed at once", i+1)
		require.Empty(t, slow, "move %d: requests made after the move's end answered later than %s", i+1, afterMoveBound)

		// Every acknowledged operation is stored exactly once, where east
		// is now; the other server holds nothing of east.
		all := load.since(time.Time{})
		stored := idempotencyKeysIn(t, ctx, urls[at], schema, "east")
		var undecided int
		deposited := int64(accounts * initial)
		for _, o := range all {
			n := stored[o.key]
			switch {
			case o.final == http.StatusOK:
				require.Equal(t, 1, n, "move %d: acknowledged %s %s stored %d times", i+1, o.kind, o.key, n)
				if o.kind == "deposit" {
					deposited += o.amount
				}
			case o.ok():
				require.Zero(t, n, "move %d: %s %s refused for funds but stored", i+1, o.kind, o.key)
			default:
				require.LessOrEqual(t, n, 1, "move %d: %s %s stored twice", i+1, o.kind, o.key)
				undecided++
			}
		}
		require.Zero(t, undecided, "move %d: operations left without a definite answer after retrying for %s", i+1, opPatience)
		for k, n := range stored {
			require.Equal(t, 1, n, "move %d: key %s stored %d times", i+1, k, n)
		}
		require.Zero(t, countEvents(t, ctx, urls[from], schema, "east"), "move %d: the source still holds east", i+1)

		inv, err := checkInvariants(ctx, c, load.accounts, deposited)
		require.NoError(t, err)
		require.Empty(t, inv.Problems, "move %d: balances, folds and the read model", i+1)
		for _, url := range []string{url1, url2} {
			out, code := runScribe(t, ctx, bin, "-db", url, "-schema", schema, "verify")
			require.Zero(t, code, "move %d: scribe verify on %s: %s", i+1, url, out)
		}
		member, err := ts.srv.backend.router.MemberOf("east")
		require.NoError(t, err)
		require.Equal(t, at, member, "move %d: the bank follows east to %s", i+1, at)
		t.Logf("move %d (%s → %s): %d operations so far, %d made after the move's end, all answered at once", i+1, from, to, len(all), len(after))
	}
}

// waitOps waits until at least n operations started at or after since have
// finished.
func waitOps(t *testing.T, ctx context.Context, l *moveLoad, since time.Time, n int) {
	t.Helper()
	for len(l.since(since)) < n {
		select {
		case <-ctx.Done():
			t.Fatalf("the load made fewer than %d operations after %s", n, since.Format(time.RFC3339Nano))
		case <-time.After(20 * time.Millisecond):
		}
	}
}
