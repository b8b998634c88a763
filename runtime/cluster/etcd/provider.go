package etcd

import (
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/scribe-es/scribe/internal/clusterprovider"
	"github.com/scribe-es/scribe/runtime/cluster"
)

// Default settings of Provider.
const (
	// DefaultBaseKey is the default of Provider.BaseKey.
	DefaultBaseKey = "/scribe"
	// DefaultTTL is the default of Provider.TTL.
	DefaultTTL = 3 * time.Second
	// DefaultDialTimeout is the default of Provider.DialTimeout.
	DefaultDialTimeout = 5 * time.Second
)

// Provider finds members through etcd: each member keeps a key
// BaseKey/<cluster name>/<member ID> alive with an etcd lease of TTL, and
// watches the keys under BaseKey/<cluster name>/. A member whose lease
// lapses (it stopped, or could not reach etcd for TTL) leaves every
// member's topology.
type Provider struct {
	// Endpoints are the etcd servers ("host:port" or URLs). Required.
	Endpoints []string
	// BaseKey is the key prefix of the clusters' members. Default
	// DefaultBaseKey ("/scribe").
	BaseKey string
	// TTL is the time to live of a member's lease, rounded up to whole
	// seconds: a member that stops renewing it is dropped after about TTL.
	// Default DefaultTTL (3 s).
	TTL time.Duration
	// DialTimeout bounds connecting to etcd and each call to it while a
	// member starts and leaves. Default DefaultDialTimeout (5 s).
	DialTimeout time.Duration
}

var _ cluster.Provider = Provider{}

// Build implements cluster.Provider: it validates the settings and returns
// a provider for one member. It does not connect yet: the member connects
// to etcd when the cluster starts it (once its remote endpoint runs).
func (e Provider) Build() (*clusterprovider.Built, error) {
	if len(e.Endpoints) == 0 {
		return nil, errors.New("etcd: Provider.Endpoints is empty; list the etcd servers (host:port)")
	}
	for _, ep := range e.Endpoints {
		if strings.TrimSpace(ep) == "" {
			return nil, fmt.Errorf("etcd: Provider.Endpoints %q has an empty entry; list the etcd servers (host:port)", e.Endpoints)
		}
	}
	if e.TTL < 0 || e.DialTimeout < 0 {
		return nil, errors.New("etcd: Provider.TTL and Provider.DialTimeout must not be negative; use 0 for the defaults")
	}
	base := strings.TrimRight(e.BaseKey, "/")
	if e.BaseKey == "" {
		base = DefaultBaseKey
	}
	ttl := e.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	dial := e.DialTimeout
	if dial == 0 {
		dial = DefaultDialTimeout
	}
	return &clusterprovider.Built{Provider: &member{
		cfg:     clientv3.Config{Endpoints: e.Endpoints, DialTimeout: dial},
		base:    base,
		ttl:     int64((ttl + time.Second - 1) / time.Second),
		timeout: dial,
		done:    make(chan struct{}),
	}}, nil
}
