package kubernetes

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
)

// outsideAPod clears the environment a pod would have.
func outsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	t.Setenv(EnvPodName, "")
	t.Setenv(EnvPodNamespace, "")
}

// Outside a pod, without Client or KubeConfig, Build says so and what to set.
func TestBuildOutsideAPodNeedsAClient(t *testing.T) {
	outsideAPod(t)
	_, err := Provider{Namespace: "ns", PodName: "pod-a"}.Build()
	require.ErrorContains(t, err, "not running in a pod")
	require.ErrorContains(t, err, "KUBERNETES_SERVICE_HOST")
	require.ErrorContains(t, err, "set Provider.Client or Provider.KubeConfig")
}

func TestBuildNeedsANamespace(t *testing.T) {
	outsideAPod(t)
	if _, err := os.Stat(serviceAccountNamespace); err == nil {
		t.Skipf("%s exists here (running in a pod): the namespace has a default", serviceAccountNamespace)
	}
	_, err := Provider{Client: fake.NewClientset(), PodName: "pod-a"}.Build()
	require.ErrorContains(t, err, "Provider.Namespace is empty")
	require.ErrorContains(t, err, EnvPodNamespace)

	t.Setenv(EnvPodNamespace, "from-env")
	m := build(t, Provider{Client: fake.NewClientset(), PodName: "pod-a"})
	require.Equal(t, "from-env", m.namespace)
	m = build(t, Provider{Client: fake.NewClientset(), Namespace: "explicit", PodName: "pod-a"})
	require.Equal(t, "explicit", m.namespace)
}

func TestBuildPodNameDefaults(t *testing.T) {
	outsideAPod(t)
	host, err := os.Hostname()
	require.NoError(t, err)
	m := build(t, Provider{Client: fake.NewClientset(), Namespace: "ns"})
	require.Equal(t, host, m.podName, "the host name")
	t.Setenv(EnvPodName, "pod-env")
	m = build(t, Provider{Client: fake.NewClientset(), Namespace: "ns"})
	require.Equal(t, "pod-env", m.podName)
	m = build(t, Provider{Client: fake.NewClientset(), Namespace: "ns", PodName: "pod-explicit"})
	require.Equal(t, "pod-explicit", m.podName)
}

func TestBuildKubeConfig(t *testing.T) {
	outsideAPod(t)
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := Provider{KubeConfig: missing, Namespace: "ns", PodName: "pod-a"}.Build()
	require.ErrorContains(t, err, `loading Provider.KubeConfig "`+missing+`"`)

	garbage := filepath.Join(t.TempDir(), "garbage")
	require.NoError(t, os.WriteFile(garbage, []byte("{not yaml: ["), 0o600))
	_, err = Provider{KubeConfig: garbage, Namespace: "ns", PodName: "pod-a"}.Build()
	require.ErrorContains(t, err, `loading Provider.KubeConfig "`+garbage+`"`)

	good := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(good, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: u
  user: {token: "t"}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`), 0o600))
	m := build(t, Provider{KubeConfig: good, Namespace: "ns", PodName: "pod-a"})
	require.NotNil(t, m.client)

	_, err = Provider{Client: fake.NewClientset(), KubeConfig: good, Namespace: "ns", PodName: "pod-a"}.Build()
	require.ErrorContains(t, err, "both Provider.Client and Provider.KubeConfig")
}

func TestBuildDurations(t *testing.T) {
	t.Parallel()
	base := Provider{Client: fake.NewClientset(), Namespace: "ns", PodName: "pod-a"}
	m := build(t, base)
	require.Equal(t, DefaultRequestTimeout, m.timeout)
	require.Equal(t, DefaultResyncInterval, m.resync)
	require.Equal(t, DefaultRetryInterval, m.retry)
	require.Equal(t, DefaultMaxRetryInterval, m.maxRetry)

	p := base
	p.RetryInterval, p.MaxRetryInterval = time.Minute, time.Second
	m = build(t, p)
	require.Equal(t, time.Minute, m.maxRetry, "the cap is at least the first pause")

	for name, set := range map[string]func(*Provider){
		"RequestTimeout":   func(p *Provider) { p.RequestTimeout = -1 },
		"ResyncInterval":   func(p *Provider) { p.ResyncInterval = -1 },
		"RetryInterval":    func(p *Provider) { p.RetryInterval = -1 },
		"MaxRetryInterval": func(p *Provider) { p.MaxRetryInterval = -1 },
	} {
		p := base
		set(&p)
		_, err := p.Build()
		require.ErrorContains(t, err, "Provider."+name+" is negative")
	}
}

func TestRetriesBackOff(t *testing.T) {
	t.Parallel()
	m := build(t, Provider{Client: fake.NewClientset(), Namespace: "ns", PodName: "pod-a"})
	var got []time.Duration
	for n := 1; n <= 7; n++ {
		got = append(got, m.backoff(n))
	}
	s := time.Second
	require.Equal(t, []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s}, got)
	require.Equal(t, 30*s, m.backoff(1000))
}
