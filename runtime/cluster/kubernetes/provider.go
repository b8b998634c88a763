package kubernetes

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/scribe-es/scribe/internal/clusterprovider"
	"github.com/scribe-es/scribe/runtime/cluster"
)

// Defaults of Provider.
const (
	DefaultRequestTimeout   = 10 * time.Second
	DefaultResyncInterval   = 5 * time.Minute
	DefaultRetryInterval    = time.Second
	DefaultMaxRetryInterval = 30 * time.Second
)

// Environment variables Provider reads its defaults from; set them with the
// downward API (see the package documentation).
const (
	EnvPodName      = "POD_NAME"
	EnvPodNamespace = "POD_NAMESPACE"
)

// serviceAccountNamespace is the file a pod's service account token mount
// names the pod's namespace in.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Provider finds a cluster's members among the pods of one namespace: each
// member labels and annotates its own pod (see LabelCluster and the other
// keys), and follows the pods that carry its cluster's label with a list
// and a watch. A pod counts as a member while it is Running, is not being
// deleted and carries the keys; its readiness is not required (see the
// package documentation for why). A Provider is a value: New calls Build
// once per Runtime, and the built provider belongs to that member.
type Provider struct {
	// Client talks to the Kubernetes API server. Default: a client built
	// from KubeConfig when that is set, otherwise from the in-cluster
	// configuration (the pod's service account). Set at most one of Client
	// and KubeConfig.
	Client k8s.Interface
	// KubeConfig is the path of a kubeconfig file, for a member running
	// outside the cluster (its current context is used). Default "" (the
	// in-cluster configuration).
	KubeConfig string
	// Namespace is the namespace of the member's pod and of the pods it
	// follows. Default: the POD_NAMESPACE environment variable, then the
	// namespace of the pod's service account
	// (/var/run/secrets/kubernetes.io/serviceaccount/namespace).
	Namespace string
	// PodName is the name of the member's own pod, which it labels. Default:
	// the POD_NAME environment variable, then the host name (a pod's host
	// name is its name unless the pod spec sets hostname).
	PodName string
	// RequestTimeout bounds each request that registers the member, lists
	// the pods or removes the registration (the latter at most 5 s, so a
	// shutdown is never held up for long). Default DefaultRequestTimeout
	// (10 s).
	RequestTimeout time.Duration
	// ResyncInterval is the longest a watch of the pods is followed before
	// it is replaced by a fresh list and watch. Default
	// DefaultResyncInterval (5 min).
	ResyncInterval time.Duration
	// RetryInterval is the pause before listing the pods again after a
	// failed list or watch; it doubles with each consecutive failure up to
	// MaxRetryInterval. Default DefaultRetryInterval (1 s).
	RetryInterval time.Duration
	// MaxRetryInterval caps the pause between retries. Default
	// DefaultMaxRetryInterval (30 s).
	MaxRetryInterval time.Duration
	// Logger receives the provider's records: registration, failed lists
	// and watches (which it retries). Default: the cluster's logger (in a
	// Runtime, its Config.Logger at Error level).
	Logger *slog.Logger
}

var _ cluster.Provider = Provider{}

// Build implements cluster.Provider: it validates the settings, resolves the
// defaults (the client, the namespace, the pod name) and returns a provider
// for one member. It does not contact the API server: the member registers
// when the cluster starts it, and reports a missing pod or a missing
// permission then.
func (p Provider) Build() (*clusterprovider.Built, error) {
	m, err := p.build()
	if err != nil {
		return nil, err
	}
	return &clusterprovider.Built{Provider: m}, nil
}

// build returns the member's provider.
func (p Provider) build() (*member, error) {
	switch {
	case p.RequestTimeout < 0:
		return nil, fmt.Errorf("kubernetes: Provider.RequestTimeout is negative (%s); use 0 for the default", p.RequestTimeout)
	case p.ResyncInterval < 0:
		return nil, fmt.Errorf("kubernetes: Provider.ResyncInterval is negative (%s); use 0 for the default", p.ResyncInterval)
	case p.RetryInterval < 0:
		return nil, fmt.Errorf("kubernetes: Provider.RetryInterval is negative (%s); use 0 for the default", p.RetryInterval)
	case p.MaxRetryInterval < 0:
		return nil, fmt.Errorf("kubernetes: Provider.MaxRetryInterval is negative (%s); use 0 for the default", p.MaxRetryInterval)
	case p.Client != nil && p.KubeConfig != "":
		return nil, fmt.Errorf("kubernetes: both Provider.Client and Provider.KubeConfig (%q) are set; set one of them", p.KubeConfig)
	}
	m := &member{
		client:    p.Client,
		namespace: p.Namespace,
		podName:   p.PodName,
		timeout:   orDefault(p.RequestTimeout, DefaultRequestTimeout),
		resync:    orDefault(p.ResyncInterval, DefaultResyncInterval),
		retry:     orDefault(p.RetryInterval, DefaultRetryInterval),
		maxRetry:  orDefault(p.MaxRetryInterval, DefaultMaxRetryInterval),
		logger:    p.Logger,
	}
	m.maxRetry = max(m.maxRetry, m.retry)
	if m.client == nil {
		c, err := newClient(p.KubeConfig)
		if err != nil {
			return nil, err
		}
		m.client = c
	}
	if m.namespace == "" {
		ns, err := defaultNamespace()
		if err != nil {
			return nil, err
		}
		m.namespace = ns
	}
	if m.podName == "" {
		m.podName = os.Getenv(EnvPodName)
	}
	if m.podName == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return nil, fmt.Errorf("kubernetes: Provider.PodName is empty, %s is unset and the host name is unknown (%v); set PodName or %s (downward API: fieldRef metadata.name)", EnvPodName, err, EnvPodName)
		}
		m.podName = h
	}
	return m, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// newClient builds a client from the kubeconfig file at path, or from the
// in-cluster configuration when path is empty.
func newClient(path string) (k8s.Interface, error) {
	var cfg *rest.Config
	if path != "" {
		var err error
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes: loading Provider.KubeConfig %q: %w; give the path of a readable kubeconfig file with a current context, or leave KubeConfig empty inside a pod", path, err)
		}
	} else {
		var err error
		cfg, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, fmt.Errorf("kubernetes: not running in a pod (KUBERNETES_SERVICE_HOST and _PORT are unset), so there is no in-cluster configuration; set Provider.Client or Provider.KubeConfig: %w", err)
		}
		if err != nil {
			return nil, fmt.Errorf("kubernetes: loading the in-cluster configuration (service account token and CA): %w; mount the token (automountServiceAccountToken) or set Provider.Client or KubeConfig", err)
		}
	}
	c, err := k8s.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: creating the API client for %s: %w", cfg.Host, err)
	}
	return c, nil
}

// defaultNamespace is the POD_NAMESPACE environment variable, else the
// service account's namespace.
func defaultNamespace() (string, error) {
	if ns := os.Getenv(EnvPodNamespace); ns != "" {
		return ns, nil
	}
	b, err := os.ReadFile(serviceAccountNamespace)
	if ns := strings.TrimSpace(string(b)); err == nil && ns != "" {
		return ns, nil
	}
	return "", fmt.Errorf("kubernetes: Provider.Namespace is empty, %s is unset and %s is unreadable or empty; set Namespace or %s (downward API: fieldRef metadata.namespace)", EnvPodNamespace, serviceAccountNamespace, EnvPodNamespace)
}
