package kubernetes

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

const testNamespace = "ns"

// runningPod is a Running pod of namespace ns with the pod IP 127.0.0.1 and
// a label of its own ("app"), which registration must keep.
func runningPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, Labels: map[string]string{"app": "scribe"}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1"},
	}
}

// topology records what a member publishes, as protoactor-go's member list
// would receive it.
type topology struct {
	mu      sync.Mutex
	calls   int
	members cluster.Members
	changed chan struct{} // signalled (buffer 1) after each publish
}

func newTopology() *topology { return &topology{changed: make(chan struct{}, 1)} }

func (tp *topology) publish(ms cluster.Members) {
	tp.mu.Lock()
	tp.calls++
	tp.members = ms
	tp.mu.Unlock()
	select {
	case tp.changed <- struct{}{}:
	default:
	}
}

func (tp *topology) snapshot() (cluster.Members, int) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.members, tp.calls
}

// ids returns the IDs of the last published members.
func (tp *topology) ids() []string {
	ms, _ := tp.snapshot()
	ids := make([]string, 0, len(ms))
	for _, m := range ms {
		ids = append(ids, m.Id)
	}
	return ids
}

// waitIDs waits until the last published members have exactly ids.
func (tp *topology) waitIDs(t *testing.T, ids ...string) {
	t.Helper()
	if ids == nil {
		ids = []string{}
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		got := tp.ids()
		if slices.Equal(got, ids) {
			return
		}
		select {
		case <-tp.changed:
		case <-deadline.C:
			require.Equal(t, ids, got, "the published topology")
			return
		}
	}
}

// build returns the member Provider p builds, failing the test on an error.
func build(t *testing.T, p Provider) *member {
	t.Helper()
	b, err := p.Build()
	require.NoError(t, err)
	return b.Provider.(*member)
}

// startOn starts a member registered as self (nil: a client) on podName of
// client in cluster name, shut down at the test's end. Retries are fast.
func startOn(t *testing.T, client *fake.Clientset, podName, name string, self *registration) (*member, *topology) {
	t.Helper()
	m := build(t, Provider{Client: client, Namespace: testNamespace, PodName: podName, RetryInterval: 10 * time.Millisecond})
	tp := newTopology()
	require.NoError(t, m.start(name, self, tp.publish, slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { require.NoError(t, m.Shutdown(true)) })
	return m, tp
}

func self(id string, port int) *registration {
	return &registration{id: id, host: "127.0.0.1", port: port, kinds: []string{"kind-a", "kind-b"}}
}

func getPod(t *testing.T, client *fake.Clientset, name string) *corev1.Pod {
	t.Helper()
	pod, err := client.CoreV1().Pods(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return pod
}

func updatePod(t *testing.T, client *fake.Clientset, name string, change func(*corev1.Pod)) {
	t.Helper()
	pod := getPod(t, client, name)
	change(pod)
	_, err := client.CoreV1().Pods(testNamespace).Update(context.Background(), pod, metav1.UpdateOptions{})
	require.NoError(t, err)
}
