package main

import (
	"math/bits"
	"time"
)

// histogram records latencies in log-linear buckets: each power of two of
// nanoseconds is split into 64 sub-buckets, so a reported quantile is within
// about 1.6% of the true value. It is not safe for concurrent use: each writer
// owns one, and they are merged after the measurement.
type histogram struct {
	counts [64 * subBuckets]uint64
	total  uint64
}

const (
	subBucketBits = 6
	subBuckets    = 1 << subBucketBits
)

// bucketOf returns the bucket of a latency of v nanoseconds.
func bucketOf(v uint64) int {
	if v < subBuckets {
		return int(v)
	}
	exp := bits.Len64(v) - subBucketBits // ≥ 1
	sub := int(v>>(exp-1)) & (subBuckets - 1)
	return exp*subBuckets + sub
}

// bucketUpper returns the largest latency, in nanoseconds, that falls into bucket b.
func bucketUpper(b int) uint64 {
	if b < subBuckets {
		return uint64(b)
	}
	exp := b / subBuckets
	sub := uint64(b % subBuckets)
	lo := (subBuckets + sub) << (exp - 1)
	return lo + (uint64(1) << (exp - 1)) - 1
}

// record adds one latency.
func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	h.total++
}

// merge adds o's counts to h.
func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
}

// quantile returns the latency below which a fraction q of the recorded
// latencies fall (the upper edge of that bucket); 0 when nothing was recorded.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q*float64(h.total) + 0.5)
	if rank < 1 {
		rank = 1
	}
	if rank > h.total {
		rank = h.total
	}
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(bucketUpper(b))
		}
	}
	return time.Duration(bucketUpper(len(h.counts) - 1))
}
