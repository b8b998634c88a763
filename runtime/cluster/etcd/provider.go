package etcd

import (
	"errors"
	"fmt"
	"time"

	petcd "github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/scribe-es/scribe/internal/clusterprovider"
	"github.com/scribe-es/scribe/runtime/cluster"
)

// Provider finds members through etcd: each member keeps a key under BaseKey
// alive with a lease, and watches the keys of the others.
type Provider struct {
	// Endpoints are the etcd servers. Required.
	Endpoints []string
	// BaseKey is the key prefix of the cluster's members. Default "/scribe".
	BaseKey string
	// DialTimeout bounds connecting to etcd. Default 5 s.
	DialTimeout time.Duration
}

var _ cluster.Provider = Provider{}

// Build implements cluster.Provider: it validates the settings and returns
// protoactor-go's etcd provider for them.
func (e Provider) Build() (*clusterprovider.Built, error) {
	if len(e.Endpoints) == 0 {
		return nil, errors.New("etcd: Provider.Endpoints is empty; list the etcd servers (host:port)")
	}
	base := e.BaseKey
	if base == "" {
		base = "/scribe"
	}
	dial := e.DialTimeout
	if dial <= 0 {
		dial = 5 * time.Second
	}
	p, err := petcd.NewWithConfig(base, clientv3.Config{Endpoints: e.Endpoints, DialTimeout: dial})
	if err != nil {
		return nil, fmt.Errorf("etcd: creating the etcd provider (%v): %w", e.Endpoints, err)
	}
	return &clusterprovider.Built{Provider: p}, nil
}
