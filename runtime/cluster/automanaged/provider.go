package automanaged

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"

	"github.com/scribe-es/scribe/internal/clusterprovider"
	scluster "github.com/scribe-es/scribe/runtime/cluster"
)

// DefaultRefreshInterval is the default of Provider.RefreshInterval.
const DefaultRefreshInterval = time.Second

// Provider is a provider for static peers: every member serves a small
// HTTP health endpoint on Port and polls the endpoints of Peers (every
// member, itself included, as "host:port") every RefreshInterval. A member
// whose endpoint does not answer within 2 s leaves the topology. Suited to
// tests and small fixed deployments.
type Provider struct {
	// Port is this member's health endpoint port (bound on every interface).
	// Required.
	Port int
	// Peers are the health endpoints of all members, "host:port". Required.
	Peers []string
	// RefreshInterval is the pause between two polls of the peers. Default
	// DefaultRefreshInterval (1 s).
	RefreshInterval time.Duration
}

var _ scluster.Provider = Provider{}

// Build implements cluster.Provider: it validates the settings and returns
// protoactor-go's automanaged provider for them.
func (a Provider) Build() (*clusterprovider.Built, error) {
	if a.Port <= 0 || a.Port > 65535 {
		return nil, fmt.Errorf("automanaged: Provider.Port is %d; give the member's health endpoint a TCP port", a.Port)
	}
	if len(a.Peers) == 0 {
		return nil, errors.New("automanaged: Provider.Peers is empty; list every member's health endpoint (this one included) as host:port")
	}
	d := a.RefreshInterval
	if d < 0 {
		return nil, fmt.Errorf("automanaged: Provider.RefreshInterval is negative (%s); use 0 for the default", d)
	}
	if d == 0 {
		d = DefaultRefreshInterval
	}
	// protoactor's automanaged provider prints "http server started" to
	// stdout when it starts its own health server; a library must not
	// write to its program's stdout, so the provider is given a quiet
	// server serving the same health document.
	q := &quietAutoManaged{port: a.Port}
	q.server = echo.New()
	q.server.HideBanner, q.server.HidePort = true, true
	q.server.GET("/_health", q.health)
	q.ClusterProvider = automanaged.NewWithTesting(d, a.Port, q.server, a.Peers...)
	return &clusterprovider.Built{Provider: q}, nil
}

// quietAutoManaged is protoactor's automanaged provider with a health server
// that prints nothing. The health document describes the member; it is
// filled in when the member starts.
type quietAutoManaged struct {
	cluster.ClusterProvider
	port   int
	server *echo.Echo
	node   atomic.Pointer[automanaged.NodeModel]
}

func (q *quietAutoManaged) describe(c *cluster.Cluster) error {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return err
	}
	q.node.Store(automanaged.NewNode(c.Config.Name, c.ActorSystem.ID, host, port, q.port, c.GetClusterKinds()))
	return nil
}

func (q *quietAutoManaged) StartMember(c *cluster.Cluster) error {
	if err := q.describe(c); err != nil {
		return err
	}
	return q.ClusterProvider.StartMember(c)
}

func (q *quietAutoManaged) StartClient(c *cluster.Cluster) error {
	if err := q.describe(c); err != nil {
		return err
	}
	return q.ClusterProvider.StartClient(c)
}

func (q *quietAutoManaged) health(ctx echo.Context) error {
	n := q.node.Load()
	if n == nil {
		return ctx.NoContent(http.StatusServiceUnavailable)
	}
	return ctx.JSON(http.StatusOK, n)
}
