package snapshots_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/snapshots"
)

func TestDefaultPolicy(t *testing.T) {
	t.Parallel()
	p := snapshots.DefaultPolicy()
	require.Equal(t, uint64(100), p.Every)
	require.True(t, p.OnPassivation)
}

func TestPolicyDue(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		every         uint64
		last, version uint64
		want          bool
	}{
		{"disabled", 0, 0, 1_000_000, false},
		{"no snapshot yet, below every", 100, 0, 99, false},
		{"no snapshot yet, exactly every", 100, 0, 100, true},
		{"no snapshot yet, past every", 100, 0, 150, true},
		{"since last, below every", 100, 250, 349, false},
		{"since last, exactly every", 100, 250, 350, true},
		{"since last, past every", 100, 250, 1000, true},
		{"version equals last", 1, 7, 7, false},
		{"version below last", 1, 7, 3, false},
		{"every 1", 1, 7, 8, true},
		{"no overflow near max", 10, math.MaxUint64 - 5, math.MaxUint64, false},
		{"huge every", math.MaxUint64, 0, math.MaxUint64, true},
		{"huge every not reached", math.MaxUint64, 1, math.MaxUint64, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := snapshots.Policy{Every: c.every}
			require.Equal(t, c.want, p.Due(c.last, c.version))
		})
	}
}

func TestPolicyDueOnPassivation(t *testing.T) {
	t.Parallel()
	on := snapshots.Policy{OnPassivation: true}
	require.True(t, on.DueOnPassivation(0, 1))
	require.True(t, on.DueOnPassivation(40, 41))
	require.False(t, on.DueOnPassivation(0, 0), "an empty stream has nothing to snapshot")
	require.False(t, on.DueOnPassivation(41, 41), "state already snapshotted")
	require.False(t, on.DueOnPassivation(41, 40))

	off := snapshots.Policy{Every: 1}
	require.False(t, off.DueOnPassivation(0, 1))
	require.False(t, off.DueOnPassivation(40, 1000))

	var zero snapshots.Policy
	require.False(t, zero.Due(0, math.MaxUint64))
	require.False(t, zero.DueOnPassivation(0, math.MaxUint64))
}

func TestPolicyRetention(t *testing.T) {
	t.Parallel()
	_, ok := snapshots.DefaultPolicy().Retention()
	require.False(t, ok, "by default every snapshot is kept")
	_, ok = snapshots.Policy{Keep: -1}.Retention()
	require.False(t, ok)
	r, ok := snapshots.Policy{Every: 10, Keep: 3}.Retention()
	require.True(t, ok)
	require.Equal(t, snapshots.Retention{Keep: 3}, r)
	require.NoError(t, r.Validate())
}
