package projection_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/projection"
)

// TestRunnerStopsOnASetupConfigurationError: a Setup that fails with a
// configuration error (journal.ErrConfiguration) ends Run at once, sliced
// or not, and is not retried; a Setup that fails otherwise is retried until
// it succeeds, and the runner then applies every event.
func TestRunnerStopsOnASetupConfigurationError(t *testing.T) {
	t.Parallel()
	for _, sliced := range []bool{false, true} {
		t.Run(fmt.Sprintf("sliced=%v", sliced), func(t *testing.T) {
			t.Parallel()
			j := memory.New()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			res, err := j.Append(ctx, []journal.Event{{ID: journal.NewEventID(), Type: "E", SchemaVersion: 1, Tags: []journal.Tag{"acct:1"}, Data: []byte(`{}`)}}, journal.AppendOptions{})
			require.NoError(t, err)
			o := projection.Options{Owner: "r", LeaseTTL: time.Second, Backoff: time.Millisecond, MaxBackoff: time.Millisecond}
			newProjection := func(name string, setup func() error, applied *atomic.Int32) projection.Projection[projection.NoTx] {
				p := projection.Projection[projection.NoTx]{Name: name, Version: 1,
					Setup: func(context.Context, projection.NoTx) error { return setup() },
					Handle: func(_ context.Context, _ projection.NoTx, b projection.Batch) error {
						applied.Add(int32(len(b.Records)))
						return nil
					}}
				if sliced {
					p.Slicing = &projection.Slicing{Group: "acct", Count: 4}
				}
				return p
			}

			var setups, applied atomic.Int32
			bad := fmt.Errorf("%w: the read model's schema is missing; create it", journal.ErrConfiguration)
			r, err := projection.NewRunner(j, projection.NewMemoryStore(), newProjection("bad", func() error { setups.Add(1); return bad }, &applied), o)
			require.NoError(t, err)
			err = r.Run(ctx)
			require.NoError(t, ctx.Err(), "Run returned before its context ended")
			require.ErrorIs(t, err, journal.ErrConfiguration)
			require.Contains(t, err.Error(), "create it")
			require.EqualValues(t, 1, setups.Load(), "not retried")
			require.Zero(t, applied.Load())

			// A transient Setup failure is retried.
			setups.Store(0)
			flaky := func() error {
				if setups.Add(1) < 3 {
					return errors.New("the database is busy")
				}
				return nil
			}
			r, err = projection.NewRunner(j, projection.NewMemoryStore(), newProjection("flaky", flaky, &applied), o)
			require.NoError(t, err)
			rctx, rcancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- r.Run(rctx) }()
			if sliced {
				require.Eventually(t, func() bool { return applied.Load() == 1 }, 30*time.Second, time.Millisecond)
			} else {
				require.NoError(t, r.WaitFor(ctx, res.Records[0].Position))
			}
			rcancel()
			require.NoError(t, <-done)
			require.EqualValues(t, 3, setups.Load(), "retried until it succeeded")
			require.EqualValues(t, 1, applied.Load())
		})
	}
}
