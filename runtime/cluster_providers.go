package runtime

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/consul"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	consulapi "github.com/hashicorp/consul/api"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Consul finds members through a Consul agent: each member registers a
// service named after the cluster with a TTL health check that it renews,
// and watches the service's healthy instances. Suited to production
// deployments that run Consul.
type Consul struct {
	// Address is the Consul agent's HTTP address ("host:port"). Default:
	// the Consul client's default (the CONSUL_HTTP_ADDR environment variable,
	// else 127.0.0.1:8500).
	Address string
	// TTL is the health check's time to live: a member that stops renewing
	// it is dropped after about TTL. Default 3 s.
	TTL time.Duration
	// RefreshInterval is how often the member renews its TTL. Default 1 s.
	RefreshInterval time.Duration
}

// Build validates the settings and returns protoactor-go's Consul provider
// for them.
func (c Consul) Build() (cluster.ClusterProvider, error) {
	if c.TTL < 0 || c.RefreshInterval < 0 {
		return nil, errors.New("runtime: Consul.TTL and Consul.RefreshInterval must not be negative; use 0 for the defaults")
	}
	var opts []consul.Option
	if c.TTL > 0 {
		opts = append(opts, consul.WithTTL(c.TTL))
	}
	if c.RefreshInterval > 0 {
		opts = append(opts, consul.WithRefreshTTL(c.RefreshInterval))
	}
	p, err := consul.NewWithConfig(&consulapi.Config{Address: c.Address}, opts...)
	if err != nil {
		return nil, fmt.Errorf("runtime: creating the Consul provider (agent %q): %w", c.Address, err)
	}
	return p, nil
}

// Etcd finds members through etcd: each member keeps a key under BaseKey
// alive with a lease, and watches the keys of the others.
type Etcd struct {
	// Endpoints are the etcd servers. Required.
	Endpoints []string
	// BaseKey is the key prefix of the cluster's members. Default "/scribe".
	BaseKey string
	// DialTimeout bounds connecting to etcd. Default 5 s.
	DialTimeout time.Duration
}

// Build validates the settings and returns protoactor-go's etcd provider
// for them.
func (e Etcd) Build() (cluster.ClusterProvider, error) {
	if len(e.Endpoints) == 0 {
		return nil, errors.New("runtime: Etcd.Endpoints is empty; list the etcd servers (host:port)")
	}
	base := e.BaseKey
	if base == "" {
		base = "/scribe"
	}
	dial := e.DialTimeout
	if dial <= 0 {
		dial = 5 * time.Second
	}
	p, err := etcd.NewWithConfig(base, clientv3.Config{Endpoints: e.Endpoints, DialTimeout: dial})
	if err != nil {
		return nil, fmt.Errorf("runtime: creating the etcd provider (%v): %w", e.Endpoints, err)
	}
	return p, nil
}

// Members that run as Kubernetes pods find each other with
// kubernetes.Provider, in package runtime/kubernetes: it lives apart so that
// only the programs that use it compile k8s.io/client-go.
