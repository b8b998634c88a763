package runtime_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/internal/metricread"
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
//
// SCRIBE_BENCH_PHASES=1 also reports where a transfer's time goes, from the
// DCB spans (tracing costs a little throughput): p50 and p99 in ms of the
// whole command (execute), of its wait at the runtime's gate (holding
// nothing), of the reservation of its first and of its second
// tag (the second is waited for while the first is held), of the fold
// (read), the append and the release (confirm), and the hold: from the first
// tag's grant to the end of the append, when the release is sent (the owner
// frees the tag one actor hop later).
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
			engine := metricread.New()
			cfg := postgres.Config{Schema: schema, MeterProvider: engine.Provider}
			require.NoError(b, postgres.Migrate(context.Background(), pool, cfg))
			j, err := postgres.NewJournal(pool, cfg)
			require.NoError(b, err)
			b.Cleanup(func() { _ = j.Close() })
			return &env{j: j, s: j, engine: engine}
		}},
	}
	for _, be := range backends {
		for _, mode := range []string{"states", "uses", "events"} {
			b.Run(be.name+"/"+mode, func(b *testing.B) {
				const goroutines = 32
				e := be.env(b)
				var phases *phaseRecorder
				var mutate []func(*runtime.Config)
				if os.Getenv("SCRIBE_BENCH_PHASES") != "" {
					phases = newPhaseRecorder()
					tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(phases))
					b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
					mutate = append(mutate, func(c *runtime.Config) { c.TracerProvider = tp })
				}
				a := startDCB(b, e, mutate...)
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
				var before metricread.Sums
				if e.engine != nil {
					var err error
					before, err = e.engine.Sums(ctx)
					require.NoError(b, err)
				}
				var next atomic.Int64
				var failed atomic.Value
				phases.reset()
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
				phases.report(b)
				if e.engine != nil {
					// The journal's side of the measured transfers: appends per
					// transaction, how many went out in one round trip, reruns.
					after, err := e.engine.Sums(ctx)
					require.NoError(b, err)
					d := func(name string) float64 { return after[name] - before[name] }
					tx := d(postgres.MetricBatches)
					appends, direct := d(postgres.MetricBatchAppends), d(postgres.MetricBatchesDirect)
					b.ReportMetric(appends/tx, "appends/tx")
					b.ReportMetric(100*direct/max(1, direct+d(postgres.MetricBatchesReadFirst)), "%direct")
					b.ReportMetric(d(postgres.MetricBatchesFenced), "fenced")
					b.ReportMetric(100*d(postgres.MetricImpliedConditions)/max(1, appends), "%implied")
					b.ReportMetric(1000*d(postgres.MetricBatchWriteTime)/tx, "ms/write")
					b.ReportMetric(1000*d(postgres.MetricBatchTime)/tx, "ms/tx")
				}
			})
		}
	}
}

// phaseRecorder is a span processor that keeps, per DCB command, how long
// each of its phases took (see BenchmarkDCBTransfers, SCRIBE_BENCH_PHASES).
// A nil *phaseRecorder records nothing.
type phaseRecorder struct {
	mu       sync.Mutex
	children map[trace.SpanID][]sdktrace.ReadOnlySpan // ended DCB phase spans by parent
	ms       map[string][]float64
}

func newPhaseRecorder() *phaseRecorder {
	return &phaseRecorder{children: map[trace.SpanID][]sdktrace.ReadOnlySpan{}, ms: map[string][]float64{}}
}

func (p *phaseRecorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (p *phaseRecorder) Shutdown(context.Context) error                  { return nil }
func (p *phaseRecorder) ForceFlush(context.Context) error                { return nil }

func (p *phaseRecorder) OnEnd(s sdktrace.ReadOnlySpan) {
	name, ok := strings.CutPrefix(s.Name(), "scribe.dcb.")
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if name != "execute" {
		p.children[s.Parent().SpanID()] = append(p.children[s.Parent().SpanID()], s)
		return
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	p.ms[name] = append(p.ms[name], ms(s.EndTime().Sub(s.StartTime())))
	for _, kv := range s.Attributes() {
		if kv.Key == "scribe.dcb.gate_wait_ms" {
			p.ms["gate"] = append(p.ms["gate"], kv.Value.AsFloat64())
		}
	}
	kids := p.children[s.SpanContext().SpanID()]
	delete(p.children, s.SpanContext().SpanID())
	slices.SortFunc(kids, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	reserved := 0
	var granted time.Time
	for _, k := range kids {
		phase := strings.TrimPrefix(k.Name(), "scribe.dcb.")
		if phase == "reserve" {
			reserved++
			phase = fmt.Sprintf("reserve%d", reserved)
			if reserved == 1 {
				granted = k.EndTime()
			}
		}
		if phase == "append" && !granted.IsZero() {
			p.ms["hold"] = append(p.ms["hold"], ms(k.EndTime().Sub(granted)))
		}
		p.ms[phase] = append(p.ms[phase], ms(k.EndTime().Sub(k.StartTime())))
	}
}

func (p *phaseRecorder) reset() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.ms)
}

// report adds the p50 and p99 of each phase to b's metrics.
func (p *phaseRecorder) report(b *testing.B) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, phase := range []string{"execute", "gate", "reserve1", "reserve2", "read", "append", "confirm", "hold"} {
		v := p.ms[phase]
		if len(v) == 0 {
			continue
		}
		slices.Sort(v)
		b.ReportMetric(v[len(v)/2], phase+"-p50-ms")
		b.ReportMetric(v[(len(v)*99)/100], phase+"-p99-ms")
	}
}
