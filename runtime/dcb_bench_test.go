package runtime_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/runtime"
)

// BenchmarkDCBTransfers measures DCB transfers between 100 wallets from 32
// goroutines, on the memory journal and on Postgres, deciding from the actors'
// aggregate states through a raw FromStates ("states") or through Uses and
// the wallet aggregate's handle ("uses"), or by folding the wallets' events
// ("events").
// It reports transfers/s:
//
//	go test -run '^$' -bench BenchmarkDCBTransfers -benchtime 20000x ./runtime
//
// SCRIBE_BENCH_WALLETS sets another number of wallets (fewer: more transfers
// wait for a wallet another transfer holds; more: fewer do).
func BenchmarkDCBTransfers(b *testing.B) {
	wallets := 100
	if v := os.Getenv("SCRIBE_BENCH_WALLETS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err, "SCRIBE_BENCH_WALLETS")
		require.GreaterOrEqual(b, n, 2, "SCRIBE_BENCH_WALLETS: a transfer needs two wallets")
		wallets = n
	}
	backends := []struct {
		name string
		env  func(b *testing.B) *env
	}{
		{"memory", func(*testing.B) *env { return memoryEnv() }},
		{"postgres", func(b *testing.B) *env {
			pool, schema := pgtest.Pool(b)
			cfg := postgres.Config{Schema: schema}
			require.NoError(b, postgres.Migrate(context.Background(), pool, cfg))
			j, err := postgres.NewJournal(pool, cfg)
			require.NoError(b, err)
			b.Cleanup(func() { _ = j.Close() })
			return &env{j: j, s: j}
		}},
	}
	for _, be := range backends {
		for _, mode := range []string{"states", "uses", "events"} {
			b.Run(be.name+"/"+mode, func(b *testing.B) {
				const goroutines = 32
				e := be.env(b)
				a := startDCB(b, e)
				a.openWallets(b, wallets, 1_000_000_000)
				execute := func(ctx context.Context, t Transfer) error { _, err := a.transfer.Execute(ctx, t); return err }
				switch mode {
				case "events":
					execute = func(ctx context.Context, t Transfer) error { _, err := a.fold.Execute(ctx, t); return err }
				case "uses":
					wallets, err := runtime.Uses[Wallet](a.rt, "wallet")
					require.NoError(b, err)
					uses, err := runtime.RegisterDCB(a.rt, walletTransferDCB(wallets))
					require.NoError(b, err)
					execute = func(ctx context.Context, t Transfer) error { _, err := uses.Execute(ctx, t); return err }
				}
				ctx := context.Background()
				pj, _ := e.j.(*postgres.Journal)
				var before postgres.Stats
				if pj != nil {
					before = pj.Stats()
				}
				var next atomic.Int64
				var failed atomic.Value
				b.ResetTimer()
				var wg sync.WaitGroup
				for range goroutines {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							from := rand.IntN(wallets)
							to := (from + 1 + rand.IntN(wallets-1)) % wallets
							if err := execute(ctx, Transfer{From: fmt.Sprint(from), To: fmt.Sprint(to), Amount: 1}); err != nil {
								failed.Store(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				if err, _ := failed.Load().(error); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transfers/s")
				if pj != nil {
					// The journal's side of the measured transfers: appends per
					// transaction, how many went out in one round trip, reruns.
					s := pj.Stats()
					tx := float64(s.Batches - before.Batches)
					b.ReportMetric(float64(s.Appends-before.Appends)/tx, "appends/tx")
					b.ReportMetric(100*float64(s.Direct-before.Direct)/float64(max(1, s.Direct-before.Direct+s.Read-before.Read)), "%direct")
					b.ReportMetric(float64(s.Fenced-before.Fenced), "fenced")
					b.ReportMetric(100*float64(s.ImpliedConditions-before.ImpliedConditions)/float64(max(1, s.Appends-before.Appends)), "%implied")
					b.ReportMetric(float64(s.WriteTime-before.WriteTime)/tx/1e6, "ms/write")
					b.ReportMetric(float64(s.BatchTime-before.BatchTime)/tx/1e6, "ms/tx")
				}
			})
		}
	}
}
