package clustertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/freeport"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/runtime/cluster"
	"github.com/scribe-es/scribe/runtime/cluster/automanaged"
)

// freePorts returns n distinct TCP ports that were free on 127.0.0.1 and
// that no outgoing connection can take before a member binds them.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	return freeport.Ports(t, n)
}

func clusterName() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "scribe-test-" + hex.EncodeToString(b[:])
}

// memberPorts is one member's remote and health endpoint ports.
type memberPorts struct{ remote, health int }

func allocate(t testing.TB, n int) ([]memberPorts, []string) {
	ports := freePorts(t, 2*n)
	ms := make([]memberPorts, n)
	peers := make([]string, n)
	for i := range ms {
		ms[i] = memberPorts{remote: ports[2*i], health: ports[2*i+1]}
		peers[i] = fmt.Sprintf("127.0.0.1:%d", ms[i].health)
	}
	return ms, peers
}

// startInProcess starts n cluster members in this process on one memory
// journal and waits until each sees all n.
func startInProcess(t testing.TB, n int, j *memory.Journal, adjust ...func(*runtime.Config)) []*runtime.Runtime {
	t.Helper()
	ms, peers := allocate(t, n)
	name := clusterName()
	rts := make([]*runtime.Runtime, n)
	for i := range n {
		rts[i] = startMember(t, name, i, ms[i], peers, j, adjust...)
	}
	waitAllMembers(t, rts, n)
	return rts
}

// waitAllMembers waits until every runtime sees n members.
func waitAllMembers(t testing.TB, rts []*runtime.Runtime, n int) {
	t.Helper()
	for _, rt := range rts {
		require.Eventually(t, func() bool { return len(rt.ClusterMembers()) == n },
			20*time.Second, 50*time.Millisecond, "every member sees %d members", n)
	}
}

// startMember starts member i of cluster name on journal j (node ID
// "node-<i+1>", session timeout 3 s), shut down at the test's end.
func startMember(t testing.TB, name string, i int, mp memberPorts, peers []string, j *memory.Journal, adjust ...func(*runtime.Config)) *runtime.Runtime {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := runtime.Config{
		Journal: j,
		NodeID:  fmt.Sprintf("node-%d", i+1),
		Bounds:  runtime.Bounds{SessionTimeout: 3 * time.Second, OpenTimeout: 5 * time.Second},
		Cluster: &cluster.Config{
			Name:     name,
			Port:     mp.remote,
			Provider: automanaged.Provider{Port: mp.health, Peers: peers, RefreshInterval: 200 * time.Millisecond},
			Commands: ledgerCommands(),
			Errors:   ledgerErrors(),
		},
	}
	for _, a := range adjust {
		a(&cfg)
	}
	rt, err := runtime.New(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, registerLedger(rt))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, rt.Shutdown(ctx))
	})
	return rt
}

func acct(id string) runtime.Target { return runtime.Target{Aggregate: "account", ID: id} }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
