package clustertest

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/clusterprovider"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/runtime/cluster"
	"github.com/scribe-es/scribe/runtime/cluster/automanaged"
	"github.com/scribe-es/scribe/runtime/cluster/consul"
	"github.com/scribe-es/scribe/runtime/cluster/etcd"
)

// New rejects an invalid cluster.Config with an error naming the field, and
// leaves nothing running.
func TestClusterConfigValidation(t *testing.T) {
	t.Parallel()
	ok := automanaged.Provider{Port: 1, Peers: []string{"127.0.0.1:1"}}
	cases := []struct {
		name string
		cfg  cluster.Config
		want string
	}{
		{"no name", cluster.Config{Port: 1, Provider: ok}, "Config.Name is empty"},
		{"no port", cluster.Config{Name: "c", Provider: ok}, "Config.Port is 0"},
		{"no provider", cluster.Config{Name: "c", Port: 1}, "Config.Provider is nil"},
		{"automanaged without peers", cluster.Config{Name: "c", Port: 1, Provider: automanaged.Provider{Port: 1}}, "Provider.Peers is empty"},
		{"automanaged without port", cluster.Config{Name: "c", Port: 1, Provider: automanaged.Provider{Peers: []string{"x:1"}}}, "Provider.Port is 0"},
		{"etcd without endpoints", cluster.Config{Name: "c", Port: 1, Provider: etcd.Provider{}}, "Provider.Endpoints is empty"},
		{"consul negative ttl", cluster.Config{Name: "c", Port: 1, Provider: consul.Provider{TTL: -time.Second}}, "must not be negative"},
		{"duplicate command name", cluster.Config{Name: "c", Port: 1, Provider: ok, Commands: []cluster.CommandType{
			cluster.Command[Deposit]("x"), cluster.Command[Withdraw]("x")}}, `names "x" twice`},
		{"duplicate command type", cluster.Config{Name: "c", Port: 1, Provider: ok, Commands: []cluster.CommandType{
			cluster.Command[Deposit]("x"), cluster.Command[Deposit]("y")}}, "lists type"},
		{"zero command", cluster.Config{Name: "c", Port: 1, Provider: ok, Commands: []cluster.CommandType{{}}}, "without a name or type"},
		{"built-in error code", cluster.Config{Name: "c", Port: 1, Provider: ok, Errors: []cluster.ErrorCode{{Code: "scribe.panic", Err: errInsufficient}}}, "built-in code"},
		{"error without sentinel", cluster.Config{Name: "c", Port: 1, Provider: ok, Errors: []cluster.ErrorCode{{Code: "x"}}}, "without a code or error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cfg := c.cfg
			rt, err := runtime.New(ctx, runtime.Config{Journal: memory.New(), NodeID: "n", Cluster: &cfg})
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
	rt, err := runtime.New(ctx, runtime.Config{Journal: memory.New(), NodeID: "n"})
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

// failingProvider is a provider whose member start fails, as a provider
// does when its registry is unreachable.
type failingProvider struct{ shutdowns *atomic.Int32 }

func (p failingProvider) Build() (*clusterprovider.Built, error) {
	return &clusterprovider.Built{Provider: p}, nil
}
func (p failingProvider) StartMember(*pcluster.Cluster) error {
	return errors.New("registry unreachable")
}
func (p failingProvider) StartClient(*pcluster.Cluster) error {
	return errors.New("registry unreachable")
}
func (p failingProvider) Shutdown(bool) error { p.shutdowns.Add(1); return nil }

// When the provider fails to start the member, New reports it and releases
// what the cluster had started already: the remote endpoint's port is free
// again.
func TestFailedProviderStartReleasesThePort(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())

	var shutdowns atomic.Int32
	rt, err := runtime.New(ctx, runtime.Config{Journal: memory.New(), NodeID: "n", Cluster: &cluster.Config{
		Name: "failing", Port: port, Provider: failingProvider{&shutdowns},
	}})
	require.Nil(t, rt)
	require.ErrorContains(t, err, "registry unreachable")
	require.ErrorContains(t, err, "is the port free and the provider reachable?")
	require.Equal(t, int32(1), shutdowns.Load(), "the provider was shut down")
	// The remote endpoint had started on the port; it must be closed now.
	l, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, err, "the remote endpoint's port is still in use after the failed start")
	require.NoError(t, l.Close())
}
