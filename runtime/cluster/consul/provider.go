package consul

import (
	"errors"
	"fmt"
	"time"

	pconsul "github.com/asynkron/protoactor-go/cluster/clusterproviders/consul"
	consulapi "github.com/hashicorp/consul/api"

	"github.com/scribe-es/scribe/internal/clusterprovider"
	"github.com/scribe-es/scribe/runtime/cluster"
)

// Provider finds members through a Consul agent: each member registers a
// service named after the cluster with a TTL health check that it renews,
// and watches the service's healthy instances. Suited to production
// deployments that run Consul.
type Provider struct {
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

var _ cluster.Provider = Provider{}

// Build implements cluster.Provider: it validates the settings and returns
// protoactor-go's Consul provider for them.
func (c Provider) Build() (*clusterprovider.Built, error) {
	if c.TTL < 0 || c.RefreshInterval < 0 {
		return nil, errors.New("consul: Provider.TTL and Provider.RefreshInterval must not be negative; use 0 for the defaults")
	}
	var opts []pconsul.Option
	if c.TTL > 0 {
		opts = append(opts, pconsul.WithTTL(c.TTL))
	}
	if c.RefreshInterval > 0 {
		opts = append(opts, pconsul.WithRefreshTTL(c.RefreshInterval))
	}
	p, err := pconsul.NewWithConfig(&consulapi.Config{Address: c.Address}, opts...)
	if err != nil {
		return nil, fmt.Errorf("consul: creating the Consul provider (agent %q): %w", c.Address, err)
	}
	return &clusterprovider.Built{Provider: p}, nil
}
