package backend_test

import (
	"errors"
	"testing"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/backend"
	"github.com/stretchr/testify/require"
)

// TestCheckLeaseOrder: the fence rule reports the first failing condition, in
// the documented order, with the sentinel every backend returns for it.
func TestCheckLeaseOrder(t *testing.T) {
	l := journal.Lease{Stream: journal.Stream("account:1"), NodeID: "a", Incarnation: 2, Epoch: 7}
	current := backend.LeaseState{Acquired: true, NodeID: "a", Incarnation: 2, Epoch: 7}
	live := backend.NodeState{Found: true, Incarnation: 2, Live: true}
	with := func(f func(*backend.LeaseState, *backend.NodeState)) (backend.LeaseState, backend.NodeState) {
		s, n := current, live
		f(&s, &n)
		return s, n
	}
	cases := []struct {
		name   string
		edit   func(*backend.LeaseState, *backend.NodeState)
		want   error
		detail string
	}{
		{"never acquired", func(s *backend.LeaseState, n *backend.NodeState) { *s = backend.LeaseState{}; n.Live = false }, journal.ErrInvalidSession, "never acquired"},
		{"taken over, even with an expired node", func(s *backend.LeaseState, n *backend.NodeState) { s.Epoch = 8; n.Live = false }, journal.ErrInvalidSession, "current epoch 8"},
		{"held by another node", func(s *backend.LeaseState, _ *backend.NodeState) { s.NodeID = "b" }, journal.ErrInvalidSession, `held by node "b"`},
		{"released", func(s *backend.LeaseState, n *backend.NodeState) { s.Released = true; n.Closed = true }, journal.ErrInvalidSession, "was released"},
		{"node without session", func(_ *backend.LeaseState, n *backend.NodeState) { *n = backend.NodeState{} }, journal.ErrInvalidSession, "no session"},
		{"superseded", func(_ *backend.LeaseState, n *backend.NodeState) { n.Incarnation = 3; n.Live = false }, journal.ErrInvalidSession, "superseded by incarnation 3"},
		{"closed", func(_ *backend.LeaseState, n *backend.NodeState) { n.Closed = true; n.Live = false }, journal.ErrInvalidSession, "was closed"},
		{"expired", func(_ *backend.LeaseState, n *backend.NodeState) { n.Live = false }, journal.ErrSessionExpired, "expired"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, n := with(c.edit)
			err := backend.CheckLease(l, s, n)
			require.ErrorIs(t, err, c.want)
			var se *journal.SessionError
			require.True(t, errors.As(err, &se))
			require.Equal(t, l.Stream, se.Stream)
			require.Contains(t, se.Detail, c.detail)
		})
	}
	require.NoError(t, backend.CheckLease(l, current, live))
	require.NoError(t, backend.CheckExpected(l.Stream, 4, 4))
	var vm *journal.VersionMismatchError
	require.ErrorAs(t, backend.CheckExpected(l.Stream, 4, 5), &vm)
	require.Equal(t, uint64(5), vm.Actual)
}
