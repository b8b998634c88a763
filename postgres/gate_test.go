package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/postgres"
)

// TestGateWidensRunningAppends evaluates what one running append adds to the
// read gate for the cases pg_locks can show, against the snapshot's xmax xm:
// an append older than the snapshot counts as itself, one from the previous
// epoch (its 32-bit xid widened past xm by 2^31 or more) one epoch less, and
// one that got its ID after the snapshot was taken (at or just past xm) not at
// all. Counting the last one an epoch less put the gate 2^32 below every
// position, and readers saw nothing until their next wake-up.
func TestGateWidensRunningAppends(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const epoch = int64(3) << 32
	xm := epoch + 1000
	for _, c := range []struct {
		name string
		f    int64
		want *int64
	}{
		{"running before the snapshot", xm - 7, ptr(xm - 7)},
		{"running, the oldest possible", xm - (1 << 31) + 1, ptr(xm - (1 << 31) + 1)},
		{"previous epoch", epoch + 4294967000, ptr(epoch + 4294967000 - (1 << 32))},
		{"got its ID after the snapshot", xm, nil},
		{"got its ID well after the snapshot", xm + 50000, nil},
	} {
		var got *int64
		err := f.pool.QueryRow(t.Context(),
			`WITH xm AS (SELECT $1::bigint AS v), w AS (SELECT $2::bigint AS f) SELECT `+postgres.GateWriterSQL+` FROM w`, xm, c.f).Scan(&got)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, got, c.name)
	}
}

func ptr(v int64) *int64 { return &v }
