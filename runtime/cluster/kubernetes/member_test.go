package kubernetes

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var podsResource = schema.GroupResource{Resource: "pods"}

// A member writes its keys on its own pod, keeping the pod's other labels,
// and Shutdown removes exactly its keys again; Shutdown is idempotent and
// may run concurrently.
func TestRegistrationLabelsTheOwnPod(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset(runningPod("pod-a"), runningPod("pod-b"))
	m, tp := startOn(t, client, "pod-a", "orders", self("member-a", 7001))
	tp.waitIDs(t, "member-a")

	pod := getPod(t, client, "pod-a")
	require.Equal(t, map[string]string{
		"app":         "scribe",
		LabelCluster:  "orders",
		LabelMemberID: "member-a",
		LabelPort:     "7001",
	}, pod.Labels)
	require.Equal(t, map[string]string{
		AnnotationAddress: "127.0.0.1:7001",
		AnnotationKinds:   "kind-a,kind-b",
	}, pod.Annotations)
	require.Equal(t, map[string]string{"app": "scribe"}, getPod(t, client, "pod-b").Labels, "only the own pod is labelled")

	ms, _ := tp.snapshot()
	require.Equal(t, cluster.Members{{Id: "member-a", Host: "127.0.0.1", Port: 7001, Kinds: []string{"kind-a", "kind-b"}}}, ms)

	var wg sync.WaitGroup
	for _, graceful := range []bool{true, false, true} {
		wg.Go(func() { require.NoError(t, m.Shutdown(graceful)) })
	}
	wg.Wait()
	pod = getPod(t, client, "pod-a")
	require.Equal(t, map[string]string{"app": "scribe"}, pod.Labels, "Shutdown removed the member's labels and kept the others")
	require.Empty(t, pod.Annotations)
	require.Error(t, m.start("orders", self("member-a", 7001), tp.publish, slog.New(slog.DiscardHandler)), "a provider is started once")
}

// The published topology follows the pods: only Running pods that are not
// being deleted and carry the cluster's keys are members.
func TestTopologyFollowsThePods(t *testing.T) {
	t.Parallel()
	other := runningPod("pod-other")
	other.Labels[LabelCluster] = "billing"
	other.Labels[LabelMemberID] = "member-other"
	other.Annotations = map[string]string{AnnotationAddress: "127.0.0.1:7999"}
	client := fake.NewClientset(runningPod("pod-a"), runningPod("pod-b"), runningPod("pod-c"), other)
	_, tp := startOn(t, client, "pod-a", "orders", self("member-a", 7001))
	tp.waitIDs(t, "member-a")

	b, tpb := startOn(t, client, "pod-b", "orders", self("member-b", 7002))
	tp.waitIDs(t, "member-a", "member-b")
	tpb.waitIDs(t, "member-a", "member-b")

	// Not Running: out; Running again: in.
	updatePod(t, client, "pod-b", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })
	tp.waitIDs(t, "member-a")
	updatePod(t, client, "pod-b", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })
	tp.waitIDs(t, "member-a", "member-b")

	// Being deleted: out, whatever its phase.
	updatePod(t, client, "pod-b", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} })
	tp.waitIDs(t, "member-a")
	updatePod(t, client, "pod-b", func(p *corev1.Pod) { p.DeletionTimestamp = nil })
	tp.waitIDs(t, "member-a", "member-b")

	// Its member shut down: the labels are gone, and so is the member.
	require.NoError(t, b.Shutdown(true))
	tp.waitIDs(t, "member-a")

	// A pod labelled by hand without the address annotation: the pod IP and
	// the port label make its address.
	updatePod(t, client, "pod-c", func(p *corev1.Pod) {
		p.Labels[LabelCluster], p.Labels[LabelMemberID], p.Labels[LabelPort] = "orders", "member-c", "7003"
		p.Status.PodIP = "10.0.0.3"
	})
	tp.waitIDs(t, "member-a", "member-c")
	ms, _ := tp.snapshot()
	require.Equal(t, "10.0.0.3:7003", ms[1].Address())
	require.Empty(t, ms[1].Kinds)

	// Deleted: out.
	require.NoError(t, client.CoreV1().Pods(testNamespace).Delete(context.Background(), "pod-c", metav1.DeleteOptions{}))
	tp.waitIDs(t, "member-a")
	require.NotContains(t, tp.ids(), "member-other", "a pod of another cluster is never a member")
}

// A pod without a usable address or member ID is not a member.
func TestMemberOfNeedsAnIDAndAnAddress(t *testing.T) {
	t.Parallel()
	pod := func(change func(*corev1.Pod)) *corev1.Pod {
		p := runningPod("p")
		p.Labels[LabelCluster], p.Labels[LabelMemberID], p.Labels[LabelPort] = "orders", "m", "7001"
		change(p)
		return p
	}
	require.NotNil(t, memberOf(pod(func(*corev1.Pod) {}), "orders"))
	require.Nil(t, memberOf(pod(func(*corev1.Pod) {}), "billing"))
	require.Nil(t, memberOf(pod(func(p *corev1.Pod) { delete(p.Labels, LabelMemberID) }), "orders"))
	require.Nil(t, memberOf(pod(func(p *corev1.Pod) { p.Status.PodIP = "" }), "orders"))
	require.Nil(t, memberOf(pod(func(p *corev1.Pod) { p.Labels[LabelPort] = "x" }), "orders"))
	require.Nil(t, memberOf(pod(func(p *corev1.Pod) { p.Labels[LabelPort] = "70000" }), "orders"))
	require.Nil(t, memberOf(pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), "orders"))
	require.NotNil(t, memberOf(pod(func(p *corev1.Pod) {
		// Readiness is not required: a member's readiness waits for it to join.
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: false}}
	}), "orders"))
	m := memberOf(pod(func(p *corev1.Pod) {
		p.Annotations = map[string]string{AnnotationAddress: "[fd00::1]:7100", AnnotationKinds: " a, ,b "}
	}), "orders")
	require.Equal(t, "fd00::1", m.Host)
	require.Equal(t, int32(7100), m.Port)
	require.Equal(t, []string{"a", "b"}, m.Kinds)
}

// A member ID that is not a valid label value is written as an annotation,
// and read back from there.
func TestMemberIDThatIsNoLabelValueIsAnAnnotation(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset(runningPod("pod-a"))
	id := "member/a " + strings.Repeat("x", 70)
	m, tp := startOn(t, client, "pod-a", "orders", self(id, 7001))
	tp.waitIDs(t, id)
	pod := getPod(t, client, "pod-a")
	require.NotContains(t, pod.Labels, LabelMemberID)
	require.Equal(t, id, pod.Annotations[LabelMemberID])
	require.NoError(t, m.Shutdown(true))
	pod = getPod(t, client, "pod-a")
	require.Equal(t, map[string]string{"app": "scribe"}, pod.Labels)
	require.Empty(t, pod.Annotations)
}

// Shutdown leaves a pod alone that another member registered on since (a
// new process in the same pod), and a pod that is gone.
func TestShutdownRemovesOnlyItsOwnRegistration(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset(runningPod("pod-a"), runningPod("pod-b"))
	a, tp := startOn(t, client, "pod-a", "orders", self("member-a", 7001))
	tp.waitIDs(t, "member-a")
	updatePod(t, client, "pod-a", func(p *corev1.Pod) { p.Labels[LabelMemberID] = "member-a2" })
	require.NoError(t, a.Shutdown(true))
	require.Equal(t, "member-a2", getPod(t, client, "pod-a").Labels[LabelMemberID])
	require.Equal(t, "orders", getPod(t, client, "pod-a").Labels[LabelCluster])

	b, _ := startOn(t, client, "pod-b", "orders", self("member-b", 7002))
	require.NoError(t, client.CoreV1().Pods(testNamespace).Delete(context.Background(), "pod-b", metav1.DeleteOptions{}))
	require.NoError(t, b.Shutdown(true), "the pod is gone: nothing to remove")
}

// A client follows the members without registering.
func TestClientDoesNotRegister(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset(runningPod("pod-a"), runningPod("pod-client"))
	_, tpc := startOn(t, client, "pod-client", "orders", nil)
	tpc.waitIDs(t)
	_, _ = startOn(t, client, "pod-a", "orders", self("member-a", 7001))
	tpc.waitIDs(t, "member-a")
	require.Equal(t, map[string]string{"app": "scribe"}, getPod(t, client, "pod-client").Labels)
}

// watches hands out the fake's watches and lets a test end them as the API
// server would; lists fail while failLists is set.
type watches struct {
	opened    chan *watch.RaceFreeFakeWatcher
	failLists atomic.Bool
	failed    chan struct{}
}

func interceptWatches(client *fake.Clientset) *watches {
	w := &watches{opened: make(chan *watch.RaceFreeFakeWatcher, 16), failed: make(chan struct{}, 16)}
	client.PrependWatchReactor("pods", func(action k8stesting.Action) (bool, watch.Interface, error) {
		fw, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		w.opened <- fw.(*watch.RaceFreeFakeWatcher)
		return true, fw, nil
	})
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if w.failLists.Load() {
			select {
			case w.failed <- struct{}{}:
			default:
			}
			return true, nil, apierrors.NewServiceUnavailable("the test failed the list")
		}
		return false, nil, nil
	})
	return w
}

func (w *watches) next(t *testing.T) *watch.RaceFreeFakeWatcher {
	t.Helper()
	select {
	case fw := <-w.opened:
		return fw
	case <-time.After(10 * time.Second):
		t.Fatal("the member opened no new watch")
		return nil
	}
}

func (w *watches) waitFailedList(t *testing.T) {
	t.Helper()
	select {
	case <-w.failed:
	case <-time.After(10 * time.Second):
		t.Fatal("the member listed no pods")
	}
}

// When a watch ends (closed by the server, an error event) the member lists
// the pods again and watches anew, retrying failed lists; changes made
// while it had no watch are picked up by the list.
func TestWatchEndsAreFollowedByAListAndAWatch(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset(runningPod("pod-a"), runningPod("pod-b"))
	w := interceptWatches(client)
	_, tp := startOn(t, client, "pod-a", "orders", self("member-a", 7001))
	first := w.next(t)
	tp.waitIDs(t, "member-a")

	// The server ends the watch; the next one sees a change.
	first.Stop()
	second := w.next(t)
	updatePod(t, client, "pod-b", func(p *corev1.Pod) {
		p.Labels[LabelCluster], p.Labels[LabelMemberID], p.Labels[LabelPort] = "orders", "member-b", "7002"
	})
	tp.waitIDs(t, "member-a", "member-b")

	// An error event ends the watch too; lists fail for a while, and the
	// change made meanwhile arrives with the first list that succeeds.
	w.failLists.Store(true)
	second.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError, Message: "boom"})
	w.waitFailedList(t)
	w.waitFailedList(t)
	updatePod(t, client, "pod-b", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
	w.failLists.Store(false)
	w.next(t)
	tp.waitIDs(t, "member-a")
}

// A cluster name that is not a label value is refused, naming the value.
func TestStartMemberRefusesAClusterNameThatIsNoLabelValue(t *testing.T) {
	t.Parallel()
	m := build(t, Provider{Client: fake.NewClientset(), Namespace: testNamespace, PodName: "pod-a"})
	for _, name := range []string{"Orders EU", "-orders", "orders.", strings.Repeat("o", 64), "orders/eu", ""} {
		err := m.StartMember(&cluster.Cluster{Config: &cluster.Config{Name: name}})
		require.ErrorContains(t, err, `cluster name "`+name+`"`)
		require.ErrorContains(t, err, "cluster.Config.Name")
		err = m.StartClient(&cluster.Cluster{Config: &cluster.Config{Name: name}})
		require.ErrorContains(t, err, `cluster name "`+name+`"`)
	}
	require.NoError(t, checkClusterName(strings.Repeat("o", 63)))
	require.NoError(t, checkClusterName("orders-eu_1.a"))
}

// Registration errors say what to do: a wrong pod name, a missing
// permission; a list refused after registration removes the registration.
func TestStartErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	nop := func(cluster.Members) {}

	client := fake.NewClientset(runningPod("pod-a"))
	m := build(t, Provider{Client: client, Namespace: testNamespace, PodName: "pod-x"})
	err := m.start("orders", self("member-x", 7001), nop, log)
	require.ErrorContains(t, err, `pod "pod-x"`)
	require.ErrorContains(t, err, "Provider.PodName")
	require.True(t, apierrors.IsNotFound(err))
	require.NoError(t, m.Shutdown(true), "Shutdown after a failed start")

	forbidden := fake.NewClientset(runningPod("pod-a"))
	forbidden.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(podsResource, "pod-a", errors.New("RBAC: access denied"))
	})
	m = build(t, Provider{Client: forbidden, Namespace: testNamespace, PodName: "pod-a"})
	err = m.start("orders", self("member-a", 7001), nop, log)
	require.ErrorContains(t, err, "get, list, watch and patch on pods")
	require.True(t, apierrors.IsForbidden(err))

	noList := fake.NewClientset(runningPod("pod-a"))
	noList.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(podsResource, "", errors.New("RBAC: access denied"))
	})
	m = build(t, Provider{Client: noList, Namespace: testNamespace, PodName: "pod-a"})
	err = m.start("orders", self("member-a", 7001), nop, log)
	require.ErrorContains(t, err, "listing the pods of cluster \"orders\"")
	require.ErrorContains(t, err, "get, list, watch and patch on pods")
	require.Equal(t, map[string]string{"app": "scribe"}, getPod(t, noList, "pod-a").Labels, "the registration was removed again")
	require.NoError(t, m.Shutdown(true))
}
