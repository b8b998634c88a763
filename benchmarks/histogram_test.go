package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHistogramBucketsCoverEveryValue(t *testing.T) {
	t.Parallel()
	for _, v := range []uint64{0, 1, 63, 64, 65, 127, 128, 1000, 1 << 20, 123456789, 1 << 40} {
		b := bucketOf(v)
		require.LessOrEqual(t, v, bucketUpper(b), "value %d above its bucket %d", v, b)
		if b > 0 {
			require.Greater(t, v, bucketUpper(b-1), "value %d not above the previous bucket", v)
		}
	}
}

func TestHistogramQuantilesWithinTwoPercent(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var h histogram
	var vals []time.Duration
	for range 100_000 {
		d := time.Duration(r.ExpFloat64() * float64(3*time.Millisecond))
		vals = append(vals, d)
		h.record(d)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		want := vals[int(q*float64(len(vals)))-1]
		got := h.quantile(q)
		require.InEpsilon(t, float64(want), float64(got), 0.02, "quantile %v", q)
	}
	var empty histogram
	require.Zero(t, empty.quantile(0.5))
	var merged histogram
	merged.merge(&h)
	merged.merge(&h)
	require.Equal(t, 2*h.total, merged.total)
	require.Equal(t, h.quantile(0.99), merged.quantile(0.99))
}
