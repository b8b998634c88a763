package scribe_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/runtime"
)

// BenchmarkUpcastCheck times runtime.CheckStored, what `upcast check` runs,
// over a Postgres journal of SCRIBE_BENCH_EVENTS events (default 1,000,000),
// half stored at version 1 and upcast to 2, in 100 streams. Seeding appends
// batches of 5,000 events and is not timed. Run:
//
//	SCRIBE_TEST_DATABASE_URL=… go test -run '^$' -bench UpcastCheck -benchtime 1x -timeout 60m .
func BenchmarkUpcastCheck(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("SCRIBE_BENCH_EVENTS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(b, err)
	}
	ctx := b.Context()
	url := pgtest.URL(b)
	_, schema := pgtest.Pool(b)
	store, err := postgres.Open(ctx, url, postgres.Config{Schema: schema})
	require.NoError(b, err)
	b.Cleanup(store.Close)
	seedStart := time.Now()
	const batch = 5000
	for done := 0; done < n; done += batch {
		events := make([]journal.Event, 0, batch)
		for i := done; i < min(n, done+batch); i++ {
			events = append(events, journal.Event{
				ID: journal.NewEventID(), Type: "Deposited", SchemaVersion: 1 + i%2,
				Tags: []journal.Tag{journal.NewTag("account", strconv.Itoa(i%100))},
				Data: json.RawMessage(fmt.Sprintf(`{"amount":%d}`, i)),
			})
		}
		_, err := store.Journal.Append(ctx, events, journal.AppendOptions{})
		require.NoError(b, err)
	}
	b.Logf("seeded %d events in %s", n, time.Since(seedStart).Round(time.Millisecond))
	rt, err := runtime.New(ctx, runtime.Config{Journal: store.Journal, NodeID: "bench-upcast-check"})
	require.NoError(b, err)
	b.Cleanup(func() { _ = rt.Shutdown(b.Context()) })
	runtime.MustRegisterEvent[checkedDeposit](rt, "Deposited", 2)
	runtime.MustRegisterUpcaster(rt, "Deposited", 1, func(d json.RawMessage) (json.RawMessage, error) { return d, nil })
	b.ResetTimer()
	for b.Loop() {
		check, err := runtime.CheckStored(ctx, rt)
		require.NoError(b, err)
		require.EqualValues(b, n, check.Checked)
		require.Zero(b, check.Failed)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
