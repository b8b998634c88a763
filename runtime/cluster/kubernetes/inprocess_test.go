// Two members in one process hit protoactor-go's own data races (gRPC's
// global logger replaced by every Remote.Start; remote.BlockList read
// without its lock by the member list), so the race detector fails these
// tests whatever this package does. They run in race-free builds;
// race_test.go runs them in one when the race detector is on.

//go:build !race

package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/scribe-es/scribe/internal/freeport"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/runtime/cluster"
	"github.com/scribe-es/scribe/runtime/cluster/kubernetes"
)

const namespace = "ns"

// A counter aggregate, enough to route commands between members.
type (
	Add     struct{ N int }
	Added   struct{ N int }
	Counter struct{ Total int }
)

func counter() runtime.Aggregate[Counter] {
	return runtime.Aggregate[Counter]{
		Name:    "counter",
		Initial: func() Counter { return Counter{} },
		Decide: func(_ Counter, cmd any) ([]any, error) {
			if c, ok := cmd.(Add); ok {
				return []any{Added(c)}, nil
			}
			return nil, fmt.Errorf("counter: unknown command %T", cmd)
		},
		Evolve: func(s Counter, ev any) Counter {
			s.Total += ev.(Added).N
			return s
		},
	}
}

func target(id string) runtime.Target { return runtime.Target{Aggregate: "counter", ID: id} }

// pod is a Running pod of namespace ns at 127.0.0.1, with a label of its own.
func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": "scribe"}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1"},
	}
}

// freePort returns a TCP port that was free on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	return freeport.Port(t)
}

// startMember starts the member of cluster "orders" running in podName,
// with the fake API server client and journal j; it is shut down at the
// test's end.
func startMember(t *testing.T, client *fake.Clientset, podName string, j *memory.Journal) *runtime.Runtime {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rt, err := runtime.New(ctx, runtime.Config{
		Journal: j,
		NodeID:  podName,
		Bounds:  runtime.Bounds{SessionTimeout: 3 * time.Second, OpenTimeout: 5 * time.Second},
		Cluster: &cluster.Config{
			Name: "orders",
			Port: freePort(t),
			Provider: kubernetes.Provider{
				Client:        client,
				Namespace:     namespace,
				PodName:       podName,
				RetryInterval: 50 * time.Millisecond,
			},
			Commands: []cluster.CommandType{cluster.Command[Add]("counter.Add")},
		},
	})
	require.NoError(t, err)
	require.NoError(t, runtime.RegisterEvent[Added](rt, "Added", 1))
	require.NoError(t, runtime.RegisterAggregate(rt, counter()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, rt.Shutdown(ctx))
	})
	return rt
}

// startPair starts members in pods pod-a and pod-b and waits until both see
// both.
func startPair(t *testing.T, client *fake.Clientset) (a, b *runtime.Runtime) {
	t.Helper()
	j := memory.New()
	a = startMember(t, client, "pod-a", j)
	b = startMember(t, client, "pod-b", j)
	both := []string{a.ClusterAddress(), b.ClusterAddress()}
	if both[0] > both[1] {
		both[0], both[1] = both[1], both[0]
	}
	for _, rt := range []*runtime.Runtime{a, b} {
		require.Eventually(t, func() bool { return fmt.Sprint(rt.ClusterMembers()) == fmt.Sprint(both) },
			20*time.Second, 20*time.Millisecond, "every member sees both")
	}
	return a, b
}

// ownedBy returns the first target whose stream owner is hosted at addr,
// as rt sees the topology, skipping the IDs in skip.
func ownedBy(t *testing.T, rt *runtime.Runtime, addr string, skip ...string) runtime.Target {
	t.Helper()
next:
	for i := range 1000 {
		tg := target(fmt.Sprintf("c%d", i))
		for _, s := range skip {
			if s == tg.ID {
				continue next
			}
		}
		if rt.ClusterOwner(tg) == addr {
			return tg
		}
	}
	t.Fatalf("no stream is hosted by %s", addr)
	return runtime.Target{}
}

func getPod(t *testing.T, client *fake.Clientset, name string) *corev1.Pod {
	t.Helper()
	p, err := client.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p
}

// waitRejoining waits until rt, dropped from the topology, is out of the
// cluster and trying to rejoin: not ready with runtime.ErrLeaseLost, yet
// not fenced for good.
func waitRejoining(t *testing.T, rt *runtime.Runtime, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		err := rt.Ready()
		return errors.Is(err, runtime.ErrLeaseLost) && strings.Contains(err.Error(), "rejoining")
	}, 20*time.Second, 20*time.Millisecond, what)
	require.Nil(t, rt.ClusterMembers(), "out of the cluster")
	select {
	case <-rt.ClusterFenced():
		t.Fatalf("%s: fenced for good, but only a twin node ID stays out", what)
	default:
	}
}

// Two members in two pods of one fake API server: each labels its pod, both
// see both, a command sent to one for a stream the other hosts runs there,
// a pod that stops Running leaves the topology (the survivor hosts every
// stream, the dropped member leaves it and tries to rejoin), and Shutdown removes a
// member's labels.
func TestInProcessTwoPodsFormACluster(t *testing.T) {
	client := fake.NewClientset(pod("pod-a"), pod("pod-b"))
	a, b := startPair(t, client)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	ids := map[string]bool{}
	for name, rt := range map[string]*runtime.Runtime{"pod-a": a, "pod-b": b} {
		p := getPod(t, client, name)
		require.Equal(t, "orders", p.Labels[kubernetes.LabelCluster], name)
		require.Equal(t, "scribe", p.Labels["app"], "the pod's own labels are kept")
		require.NotEmpty(t, p.Labels[kubernetes.LabelMemberID], name)
		require.Equal(t, rt.ClusterAddress(), p.Annotations[kubernetes.AnnotationAddress], name)
		require.NotEmpty(t, p.Annotations[kubernetes.AnnotationKinds], name)
		ids[p.Labels[kubernetes.LabelMemberID]] = true
	}
	require.Len(t, ids, 2, "each member has its own ID")

	// Routing: a stream hosted by b, executed through a.
	onB := ownedBy(t, a, b.ClusterAddress())
	require.Equal(t, b.ClusterAddress(), b.ClusterOwner(onB), "both members agree on the owner")
	res, err := a.Execute(ctx, onB, Add{N: 2})
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.Version)
	require.Equal(t, 1, b.ActiveStreams(), "executed on the hosting member")
	require.Equal(t, 0, a.ActiveStreams())
	alsoOnB := ownedBy(t, a, b.ClusterAddress(), onB.ID)

	// pod-b fails: a hosts everything; b (dropped) leaves and tries to
	// rejoin, which it cannot while its pod is not Running.
	p := getPod(t, client, "pod-b")
	p.Status.Phase = corev1.PodFailed
	_, err = client.CoreV1().Pods(namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return fmt.Sprint(a.ClusterMembers()) == fmt.Sprint([]string{a.ClusterAddress()}) },
		10*time.Second, 20*time.Millisecond, "a sees b leave")
	require.Equal(t, a.ClusterAddress(), a.ClusterOwner(onB))
	require.Equal(t, a.ClusterAddress(), a.ClusterOwner(alsoOnB))
	waitRejoining(t, b, "b, dropped from the topology, leaves it and tries to rejoin")
	res, err = a.Execute(ctx, alsoOnB, Add{N: 1})
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.Version)
	require.Equal(t, 1, a.ActiveStreams(), "executed by a itself")

	// b shuts down: its labels go, and the stream it hosted moves to a.
	require.NoError(t, b.Shutdown(ctx))
	require.Equal(t, map[string]string{"app": "scribe"}, getPod(t, client, "pod-b").Labels)
	require.Empty(t, getPod(t, client, "pod-b").Annotations)
	res, err = a.Execute(ctx, onB, Add{N: 3})
	require.NoError(t, err)
	require.Equal(t, uint64(2), res.Version, "a continues b's stream")

	require.NoError(t, a.Shutdown(ctx))
	require.Equal(t, map[string]string{"app": "scribe"}, getPod(t, client, "pod-a").Labels)
}

// A deleted pod leaves the topology at once.
func TestInProcessDeletedPodLeaves(t *testing.T) {
	client := fake.NewClientset(pod("pod-a"), pod("pod-b"))
	a, b := startPair(t, client)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	onB := ownedBy(t, a, b.ClusterAddress())

	require.NoError(t, client.CoreV1().Pods(namespace).Delete(ctx, "pod-b", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return fmt.Sprint(a.ClusterMembers()) == fmt.Sprint([]string{a.ClusterAddress()}) },
		10*time.Second, 20*time.Millisecond, "a sees b leave")
	require.Equal(t, a.ClusterAddress(), a.ClusterOwner(onB))
	waitRejoining(t, b, "b, dropped from the topology, leaves it and tries to rejoin")
	require.NoError(t, b.Shutdown(ctx), "the pod is gone; Shutdown has nothing to remove")
	res, err := a.Execute(ctx, onB, Add{N: 1})
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.Version)
	require.Equal(t, 1, a.ActiveStreams())
}
