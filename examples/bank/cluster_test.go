package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
)

// clusterPorts returns n distinct TCP ports that were free on 127.0.0.1.
func clusterPorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		require.NoError(t, l.Close())
	}
	return ports
}

// bankPost posts body to url with an Idempotency-Key and decodes the JSON answer.
func bankPost(ctx context.Context, hc *http.Client, url, key string, body any, out any) (int, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
}

// Three bank processes form a cluster on one Postgres schema; transfers,
// deposits and reads are sent to all of them: any member serves any
// account, money is conserved, every acknowledged transfer is stored once,
// and each account's events are gap-free.
func TestPostgresClusterThreeNodes(t *testing.T) {
	t.Parallel()
	_, schema := pgtest.Pool(t)
	dbURL := pgtest.URL(t)
	bin := buildBinary(t)
	const n = 3
	ports := clusterPorts(t, 2*n)
	var peers []string
	for i := range n {
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]))
	}
	args := func(i int) []string {
		return []string{"-addr", "127.0.0.1:0", "-db", dbURL, "-schema", schema, "-node", fmt.Sprintf("bank-%d", i+1),
			"-cluster-name", "bank-" + schema, "-cluster-port", fmt.Sprint(ports[2*i]), "-cluster-health-port", fmt.Sprint(ports[2*i+1]),
			"-cluster-peers", strings.Join(peers, ","), "-cluster-refresh", "300ms", "-session-timeout", "3s"}
	}
	// The first node migrates the schema; the others start once it listens.
	procs := []*process{startProcess(t, bin, args(0)...)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := startProcess(t, bin, args(i)...)
			mu.Lock()
			procs = append(procs, p)
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Len(t, procs, n)
	hc := &http.Client{Timeout: 20 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// post sends a request to member i, moving to the next member on a
	// transport error or a 503, with the same key.
	post := func(i int, path, key string, body any, out any) int {
		for attempt := 0; ; attempt++ {
			p := procs[(i+attempt)%n]
			status, err := bankPost(ctx, hc, "http://"+p.addr+path, key, body, out)
			if err == nil && status != http.StatusServiceUnavailable {
				return status
			}
			require.Less(t, attempt, 200, "request %s %s never answered: status %d, %v", path, key, status, err)
			select {
			case <-ctx.Done():
				t.Fatalf("request %s %s unresolved: %v", path, key, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	const accounts, opening = 24, 1000
	for a := range accounts {
		var view AccountView
		id := fmt.Sprintf("acct%02d", a)
		require.Equal(t, http.StatusCreated, post(a, "/accounts", "open-"+id, map[string]string{"id": id}, &view), id)
		require.Equal(t, http.StatusOK, post(a+1, "/accounts/"+id+"/deposit", "dep-"+id, map[string]int64{"amount": opening}, &view))
	}
	// A domain error crosses members with its code and message.
	var e struct{ Error, Code string }
	for i := range n {
		require.Equal(t, http.StatusConflict, post(i, "/accounts/acct00/withdraw", fmt.Sprintf("big-%d", i), map[string]int64{"amount": 900000}, &e))
		require.Equal(t, "insufficient_funds", e.Code)
		require.Contains(t, e.Error, "acct00", "the message of the hosting member's error")
	}

	var acked sync.Map // transfer ID -> amount
	deadline := time.Now().Add(5 * time.Second)
	var load sync.WaitGroup
	for w := range 16 {
		load.Add(1)
		go func() {
			defer load.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				from, to := fmt.Sprintf("acct%02d", (w+i)%accounts), fmt.Sprintf("acct%02d", (w*5+i*7+1)%accounts)
				if from == to {
					continue
				}
				var tv TransferView
				status := post(w+i, "/transfers", fmt.Sprintf("t-%d-%d", w, i), map[string]any{"from": from, "to": to, "amount": 1 + (w*i)%50}, &tv)
				switch status {
				case http.StatusOK:
					acked.Store(tv.ID, true)
				case http.StatusConflict: // insufficient funds
				default:
					t.Errorf("transfer %s->%s: status %d", from, to, status)
					return
				}
			}
		}()
	}
	load.Wait()

	var total int64
	stored := map[string]int{}
	for a := range accounts {
		id := fmt.Sprintf("acct%02d", a)
		var events []EventView
		resp, err := hc.Get("http://" + procs[a%n].addr + "/accounts/" + id + "/events")
		require.NoError(t, err)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&events))
		resp.Body.Close()
		var balance int64
		for v, ev := range events {
			require.Equal(t, uint64(v+1), ev.Version, "account %s: versions are gap-free", id)
			var d struct {
				Amount     int64
				TransferID string
				From       string
			}
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			switch ev.Type {
			case "MoneyDeposited":
				balance += d.Amount
			case "MoneyWithdrawn":
				balance -= d.Amount
			case "MoneyTransferred":
				stored[d.TransferID]++
				if d.From == id {
					balance -= d.Amount
				} else {
					balance += d.Amount
				}
			}
			require.GreaterOrEqual(t, balance, int64(0), "account %s: never negative", id)
		}
		var view AccountView
		require.Equal(t, http.StatusOK, getJSON(t, hc, "http://"+procs[(a+2)%n].addr+"/accounts/"+id, &view))
		require.Equal(t, balance, view.Balance, "account %s: the served balance is the fold of its events", id)
		total += balance
	}
	require.Equal(t, int64(accounts*opening), total, "money conserved")
	n2 := 0
	acked.Range(func(k, _ any) bool {
		n2++
		require.Equal(t, 2, stored[k.(string)], "acknowledged transfer %s is stored once, in both accounts' streams", k)
		return true
	})
	require.Len(t, stored, n2, "every stored transfer was acknowledged")
	t.Logf("%d transfers acknowledged across %d members", n2, n)
}

func getJSON(t *testing.T, hc *http.Client, url string, out any) int {
	t.Helper()
	resp, err := hc.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	return resp.StatusCode
}
