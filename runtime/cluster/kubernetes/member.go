package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/scribe-es/scribe/internal/backoff"
)

// The keys a member writes on its own pod. Select a cluster's pods with
// LabelCluster, e.g. kubectl get pods -l scribe.dev/cluster=orders
// -L scribe.dev/member-id.
const (
	// LabelCluster is the label naming the cluster the pod's member belongs
	// to (cluster.Config.Name).
	LabelCluster = "scribe.dev/cluster"
	// LabelMemberID is the member's ID, the ID of its actor system. When an
	// ID is not a valid label value it is written as an annotation with the
	// same key instead.
	LabelMemberID = "scribe.dev/member-id"
	// LabelPort is the port of the member's remote endpoint, used with the
	// pod's IP when AnnotationAddress is missing.
	LabelPort = "scribe.dev/port"
	// AnnotationAddress is the address ("host:port") other members reach
	// the member at: cluster.Config's Host and Port.
	AnnotationAddress = "scribe.dev/address"
	// AnnotationKinds lists the member's cluster kinds, comma-separated.
	AnnotationKinds = "scribe.dev/kinds"
)

// deregisterTimeout bounds removing a member's keys from its pod.
const deregisterTimeout = 5 * time.Second

// registration is what a member writes on its pod.
type registration struct {
	id    string
	host  string
	port  int
	kinds []string
}

// member is the provider Build returns, for one member (or client) of one
// cluster. StartMember or StartClient starts it once; Shutdown stops it and
// may be called any number of times, concurrently.
type member struct {
	client    k8s.Interface
	namespace string
	podName   string
	timeout   time.Duration
	resync    time.Duration
	retry     time.Duration
	maxRetry  time.Duration
	logger    *slog.Logger

	// mu serialises start and Shutdown; the fields below it are set by
	// start and read by Shutdown.
	mu       sync.Mutex
	started  bool
	stopped  bool
	self     *registration // nil for a client
	cluster  string
	selector string
	publish  func(cluster.Members)
	log      *slog.Logger
	cancel   context.CancelFunc // ends the discovery goroutine's context
	done     chan struct{}      // closed when the discovery goroutine returned

	// last is the key of the last published topology, published whether
	// one was; only the discovery goroutine (and start, before it runs)
	// uses them.
	last      string
	published bool
}

var _ cluster.ClusterProvider = (*member)(nil)

// StartMember registers the member on its pod, publishes the cluster's
// members to c's member list and keeps following them until Shutdown. It
// returns an error (which protoactor-go's cluster turns into a panic, and
// runtime.New into an error) when the cluster name is not a valid label
// value, the pod cannot be patched or the pods cannot be listed.
func (m *member) StartMember(c *cluster.Cluster) error {
	if err := checkClusterName(c.Config.Name); err != nil {
		return err
	}
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil || port <= 0 {
		return fmt.Errorf("kubernetes: the member's actor system has no remote address (%q); start it as a cluster member with a remote port (cluster.Config.Port)", c.ActorSystem.Address())
	}
	kinds := c.GetClusterKinds()
	slices.Sort(kinds)
	self := &registration{id: c.ActorSystem.ID, host: host, port: port, kinds: kinds}
	return m.start(c.Config.Name, self, c.MemberList.UpdateClusterTopology, m.loggerOr(c.Logger()))
}

// StartClient publishes the cluster's members to c's member list and keeps
// following them until Shutdown, without registering: a client hosts no
// grains.
func (m *member) StartClient(c *cluster.Cluster) error {
	if err := checkClusterName(c.Config.Name); err != nil {
		return err
	}
	return m.start(c.Config.Name, nil, c.MemberList.UpdateClusterTopology, m.loggerOr(c.Logger()))
}

func (m *member) loggerOr(def *slog.Logger) *slog.Logger {
	l := m.logger
	if l == nil {
		l = def
	}
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return l.With("component", "scribe-kubernetes", "pod", m.podName, "namespace", m.namespace)
}

// checkClusterName reports a cluster name that cannot be a label value.
func checkClusterName(name string) error {
	if errs := validation.IsValidLabelValue(name); len(errs) > 0 || name == "" {
		if name == "" {
			errs = append(errs, "must not be empty")
		}
		return fmt.Errorf("kubernetes: cluster name %q cannot be the value of label %s: %s; choose a cluster.Config.Name of at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
			name, LabelCluster, strings.Join(errs, "; "))
	}
	return nil
}

// start registers self (unless nil), lists the cluster's pods, publishes
// them, opens a watch and hands it to the discovery goroutine. publish is
// only ever called by one goroutine at a time: start's caller, then the
// discovery goroutine.
func (m *member) start(name string, self *registration, publish func(cluster.Members), log *slog.Logger) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.stopped:
		return errors.New("kubernetes: the provider was shut down; Build a new one for each start")
	case m.started:
		return errors.New("kubernetes: the provider was started twice; Build one per member")
	}
	m.started = true
	m.cluster, m.self, m.publish, m.log = name, self, publish, log
	m.selector = LabelCluster + "=" + name

	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	defer cancel()
	if self != nil {
		if err := m.register(ctx); err != nil {
			m.self = nil // nothing to remove
			return err
		}
	}
	pods, rv, err := m.list(ctx)
	if err != nil {
		if self != nil {
			_ = m.deregister() // best effort: the list's error matters
			m.self = nil
		}
		return err
	}
	m.publishTopology(pods)

	runCtx, stop := context.WithCancel(context.Background())
	m.cancel, m.done = stop, make(chan struct{})
	// The watch opens here, before start returns, so that a member started
	// after this one returned is seen by it even through a server that
	// does not honour resource versions. Failing to open it is retried.
	w, err := m.watch(runCtx, rv)
	if err != nil {
		m.log.Error("watching the cluster's pods failed; retrying", "selector", m.selector, "error", err)
	}
	go m.run(runCtx, pods, w, err != nil)
	return nil
}

// Shutdown stops following the cluster's pods (it waits for the discovery
// goroutine) and removes the member's keys from its pod, within 5 s. It
// returns once both are done, also when another Shutdown runs concurrently;
// later calls return nil at once. graceful makes no difference: a fenced
// member must stop being announced as much as a leaving one.
func (m *member) Shutdown(graceful bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return nil
	}
	m.stopped = true
	if m.cancel == nil { // never started, or the start failed
		return nil
	}
	m.cancel()
	<-m.done
	if m.self != nil {
		return m.deregister()
	}
	return nil
}

// register merge-patches the member's labels and annotations onto its pod,
// keeping the pod's other labels.
func (m *member) register(ctx context.Context) error {
	s := m.self
	labels := map[string]any{
		LabelCluster: m.cluster,
		LabelPort:    strconv.Itoa(s.port),
	}
	annotations := map[string]any{
		AnnotationAddress: net.JoinHostPort(s.host, strconv.Itoa(s.port)),
		AnnotationKinds:   strings.Join(s.kinds, ","),
	}
	if len(validation.IsValidLabelValue(s.id)) == 0 {
		labels[LabelMemberID], annotations[LabelMemberID] = s.id, nil
	} else {
		labels[LabelMemberID], annotations[LabelMemberID] = nil, s.id
	}
	if err := m.patch(ctx, labels, annotations); err != nil {
		return m.explain(err, "register the member on")
	}
	m.log.Info("registered the member on its pod", "cluster", m.cluster, "member", s.id,
		"address", annotations[AnnotationAddress])
	return nil
}

// deregister removes the member's keys from its pod, unless the pod is gone
// or names another member by now (a new process in the same pod).
func (m *member) deregister() error {
	ctx, cancel := context.WithTimeout(context.Background(), min(m.timeout, deregisterTimeout))
	defer cancel()
	pod, err := m.client.CoreV1().Pods(m.namespace).Get(ctx, m.podName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return m.explain(err, "remove the member's labels from")
	}
	if memberID(pod) != m.self.id {
		return nil
	}
	labels := map[string]any{LabelCluster: nil, LabelMemberID: nil, LabelPort: nil}
	annotations := map[string]any{AnnotationAddress: nil, AnnotationKinds: nil, LabelMemberID: nil}
	if err := m.patch(ctx, labels, annotations); err != nil && !apierrors.IsNotFound(err) {
		return m.explain(err, "remove the member's labels from")
	}
	m.log.Info("removed the member's registration from its pod", "cluster", m.cluster, "member", m.self.id)
	return nil
}

func (m *member) patch(ctx context.Context, labels, annotations map[string]any) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}})
	if err != nil {
		return err
	}
	_, err = m.client.CoreV1().Pods(m.namespace).Patch(ctx, m.podName, types.MergePatchType, body, metav1.PatchOptions{})
	return err
}

// explain turns an API error about the member's own pod into one that says
// what to do.
func (m *member) explain(err error, doing string) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kubernetes: could not %s pod %q: no such pod in namespace %q; set Provider.PodName and Namespace to this pod's (defaults: %s or the host name; %s or the account's namespace): %w",
			doing, m.podName, m.namespace, EnvPodName, EnvPodNamespace, err)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return fmt.Errorf("kubernetes: could not %s pod %q in namespace %q: refused; grant the pod's service account get, list, watch and patch on pods (a Role and RoleBinding, see the package docs): %w",
			doing, m.podName, m.namespace, err)
	default:
		return fmt.Errorf("kubernetes: could not %s pod %q in namespace %q: %w", doing, m.podName, m.namespace, err)
	}
}

// list returns the pods of the cluster by name, and the list's resource
// version.
func (m *member) list(ctx context.Context) (map[string]*corev1.Pod, string, error) {
	l, err := m.client.CoreV1().Pods(m.namespace).List(ctx, metav1.ListOptions{LabelSelector: m.selector})
	if err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return nil, "", fmt.Errorf("kubernetes: listing the pods of cluster %q in namespace %q was refused; grant the pod's service account get, list, watch and patch on pods (a Role and RoleBinding, see the package docs): %w", m.cluster, m.namespace, err)
		}
		return nil, "", fmt.Errorf("kubernetes: listing the pods of cluster %q in namespace %q (selector %s): %w", m.cluster, m.namespace, m.selector, err)
	}
	pods := make(map[string]*corev1.Pod, len(l.Items))
	for i := range l.Items {
		pods[l.Items[i].Name] = &l.Items[i]
	}
	return pods, l.ResourceVersion, nil
}

// watch opens a watch of the cluster's pods from resource version rv; the
// server ends it after about the resync interval.
func (m *member) watch(ctx context.Context, rv string) (watch.Interface, error) {
	secs := int64(max(m.resync/time.Second, 1))
	w, err := m.client.CoreV1().Pods(m.namespace).Watch(ctx, metav1.ListOptions{
		LabelSelector:   m.selector,
		ResourceVersion: rv,
		TimeoutSeconds:  &secs,
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: watching the pods of cluster %q in namespace %q (selector %s): %w", m.cluster, m.namespace, m.selector, err)
	}
	return w, nil
}

// run is the discovery goroutine: it follows the watch w, and lists and
// watches again whenever a watch ends (after a pause that grows with
// consecutive failures), until ctx ends. failed says that opening w failed.
func (m *member) run(ctx context.Context, pods map[string]*corev1.Pod, w watch.Interface, failed bool) {
	defer close(m.done)
	failures := 0
	if failed {
		failures = 1
	}
	for {
		if w != nil {
			if !m.follow(ctx, pods, w) {
				failures++
			} else {
				failures = 0
			}
			w.Stop()
			w = nil
		}
		if failures > 0 && !m.pause(ctx, failures) {
			return
		}
		if ctx.Err() != nil {
			return
		}
		lctx, cancel := context.WithTimeout(ctx, m.timeout)
		fresh, rv, err := m.list(lctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			m.log.Error("listing the cluster's pods failed; retrying", "error", err, "failures", failures)
			continue
		}
		pods = fresh
		m.publishTopology(pods)
		w, err = m.watch(ctx, rv)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			m.log.Error("watching the cluster's pods failed; retrying", "error", err, "failures", failures)
		}
	}
}

// backoff is the pause before retry number n (from 1): RetryInterval,
// doubled for each earlier consecutive failure, at most MaxRetryInterval.
func (m *member) backoff(n int) time.Duration {
	d := m.retry
	for i := 1; i < n && d < m.maxRetry; i++ {
		d *= 2
	}
	return min(d, m.maxRetry)
}

// pause waits before retry number n, and reports false when ctx ended.
func (m *member) pause(ctx context.Context, n int) bool { return backoff.Sleep(ctx, m.backoff(n)) }

// follow applies w's events to pods and publishes each change of the
// topology, until the watch ends, the resync interval passed or ctx ended.
// It reports false when the watch failed: an error event, or a watch closed
// by the server before the retry interval passed.
func (m *member) follow(ctx context.Context, pods map[string]*corev1.Pod, w watch.Interface) bool {
	opened := time.Now()
	resync := time.NewTimer(m.resync)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return true
		case <-resync.C:
			return true
		case ev, ok := <-w.ResultChan():
			if !ok {
				return time.Since(opened) >= m.retry
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if pod, ok := ev.Object.(*corev1.Pod); ok {
					if pod.Labels[LabelCluster] == m.cluster {
						pods[pod.Name] = pod
					} else {
						delete(pods, pod.Name) // the member left (or never joined)
					}
				}
			case watch.Deleted:
				if pod, ok := ev.Object.(*corev1.Pod); ok {
					delete(pods, pod.Name)
				}
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					m.log.Info("the pod watch fell behind; listing again", "error", err)
					return true
				}
				m.log.Error("the pod watch failed; retrying", "error", err)
				return false
			default: // bookmarks
				continue
			}
			m.publishTopology(pods)
		}
	}
}

// publishTopology hands the members among pods to publish when they differ
// from the last published ones.
func (m *member) publishTopology(pods map[string]*corev1.Pod) {
	members := membersOf(pods, m.cluster)
	var b strings.Builder
	for _, mb := range members {
		fmt.Fprintf(&b, "%s@%s:%d/%s;", mb.Id, mb.Host, mb.Port, strings.Join(mb.Kinds, ","))
	}
	if key := b.String(); key != m.last || !m.published {
		m.last, m.published = key, true
		m.publish(members)
	}
}

// membersOf returns the members of cluster name among pods, by ID.
func membersOf(pods map[string]*corev1.Pod, name string) cluster.Members {
	members := make(cluster.Members, 0, len(pods))
	for _, pod := range pods {
		if mb := memberOf(pod, name); mb != nil {
			members = append(members, mb)
		}
	}
	slices.SortFunc(members, func(a, b *cluster.Member) int { return strings.Compare(a.Id, b.Id) })
	return members
}

// memberOf returns the member pod announces in cluster name, or nil when it
// announces none there, is not Running or is being deleted. Container
// readiness is deliberately not checked (see the package documentation).
func memberOf(pod *corev1.Pod, name string) *cluster.Member {
	if pod.Labels[LabelCluster] != name || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return nil
	}
	id := memberID(pod)
	if id == "" {
		return nil
	}
	host, portText, err := net.SplitHostPort(pod.Annotations[AnnotationAddress])
	if err != nil || host == "" {
		host, portText = pod.Status.PodIP, pod.Labels[LabelPort]
	}
	port, err := strconv.Atoi(portText)
	if host == "" || err != nil || port <= 0 || port > 65535 {
		return nil
	}
	var kinds []string
	for k := range strings.SplitSeq(pod.Annotations[AnnotationKinds], ",") {
		if k = strings.TrimSpace(k); k != "" {
			kinds = append(kinds, k)
		}
	}
	return &cluster.Member{Id: id, Host: host, Port: int32(port), Kinds: kinds}
}

// memberID is the member ID pod carries, as a label or an annotation.
func memberID(pod *corev1.Pod) string {
	if id := pod.Labels[LabelMemberID]; id != "" {
		return id
	}
	return pod.Annotations[LabelMemberID]
}
