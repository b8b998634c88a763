package clustertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// New rejects an invalid ClusterConfig with an error naming the field, and
// leaves nothing running.
func TestClusterConfigValidation(t *testing.T) {
	t.Parallel()
	ok := runtime.AutoManaged{Port: 1, Peers: []string{"127.0.0.1:1"}}
	cases := []struct {
		name string
		cfg  runtime.ClusterConfig
		want string
	}{
		{"no name", runtime.ClusterConfig{Port: 1, Provider: ok}, "ClusterConfig.Name is empty"},
		{"no port", runtime.ClusterConfig{Name: "c", Provider: ok}, "ClusterConfig.Port is 0"},
		{"no provider", runtime.ClusterConfig{Name: "c", Port: 1}, "ClusterConfig.Provider is nil"},
		{"automanaged without peers", runtime.ClusterConfig{Name: "c", Port: 1, Provider: runtime.AutoManaged{Port: 1}}, "AutoManaged.Peers is empty"},
		{"automanaged without port", runtime.ClusterConfig{Name: "c", Port: 1, Provider: runtime.AutoManaged{Peers: []string{"x:1"}}}, "AutoManaged.Port is 0"},
		{"etcd without endpoints", runtime.ClusterConfig{Name: "c", Port: 1, Provider: runtime.Etcd{}}, "Etcd.Endpoints is empty"},
		{"consul negative ttl", runtime.ClusterConfig{Name: "c", Port: 1, Provider: runtime.Consul{TTL: -time.Second}}, "must not be negative"},
		{"duplicate command name", runtime.ClusterConfig{Name: "c", Port: 1, Provider: ok, Commands: []runtime.CommandType{
			runtime.ClusterCommand[Deposit]("x"), runtime.ClusterCommand[Withdraw]("x")}}, `names "x" twice`},
		{"duplicate command type", runtime.ClusterConfig{Name: "c", Port: 1, Provider: ok, Commands: []runtime.CommandType{
			runtime.ClusterCommand[Deposit]("x"), runtime.ClusterCommand[Deposit]("y")}}, "lists type"},
		{"zero command", runtime.ClusterConfig{Name: "c", Port: 1, Provider: ok, Commands: []runtime.CommandType{{}}}, "without a name or type"},
		{"built-in error code", runtime.ClusterConfig{Name: "c", Port: 1, Provider: ok, Errors: []runtime.ErrorCode{{Code: "scribe.panic", Err: errInsufficient}}}, "built-in code"},
		{"error without sentinel", runtime.ClusterConfig{Name: "c", Port: 1, Provider: ok, Errors: []runtime.ErrorCode{{Code: "x"}}}, "without a code or error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cfg := c.cfg
			rt, err := runtime.New(ctx, runtime.Config{Journal: journal.NewMemory(), NodeID: "n", Cluster: &cfg})
			require.Nil(t, rt)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// A runtime without Cluster has no cluster: no members, no fence channel.
func TestSingleNodeHasNoCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rt, err := runtime.New(ctx, runtime.Config{Journal: journal.NewMemory(), NodeID: "n"})
	require.NoError(t, err)
	require.NoError(t, registerLedger(rt))
	require.Nil(t, rt.ClusterMembers())
	require.Nil(t, rt.ClusterFenced())
	require.Empty(t, rt.ClusterAddress())
	require.Empty(t, rt.ClusterOwner(acct("x")))
	res, err := runtime.ExecuteTyped[Account](ctx, rt, acct("x"), Deposit{Amount: 3})
	require.NoError(t, err)
	require.Equal(t, int64(3), res.State.Balance)
	require.NoError(t, rt.Shutdown(ctx))
}

// IsRetryable classifies the cluster's and the journal's transient errors.
func TestIsRetryable(t *testing.T) {
	t.Parallel()
	for _, err := range []error{runtime.ErrNodeUnavailable, runtime.ErrNodeFenced, journal.ErrOpenTimeout, journal.ErrSessionExpired, journal.ErrInvalidSession, journal.ErrOutcomeUnknown} {
		require.True(t, runtime.IsRetryable(err), "%v", err)
	}
	for _, err := range []error{errInsufficient, journal.ErrVersionMismatch, runtime.ErrUnknownCommand, runtime.ErrPanic} {
		require.False(t, runtime.IsRetryable(err), "%v", err)
	}
}
