package runtime

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
)

// Defaults of ClusterConfig.
const (
	DefaultClusterHost         = "127.0.0.1"
	DefaultClusterJoinTimeout  = 15 * time.Second
	DefaultAutoManagedInterval = time.Second
)

// ClusterConfig turns a Runtime into a member of a cluster of runtimes
// (protoactor-go cluster, disthash identity lookup): every stream is hosted by
// exactly one member, chosen by rendezvous hashing over the members, and
// Execute on any member is routed to it. Commands and replies cross members as
// protobuf envelopes whose payloads the runtime's Codec encodes, so every
// command type sent to another member must be listed in Commands.
//
// Failover: when a member dies, its streams move to the survivors once the
// provider notices (AutoManaged: within RefreshInterval plus its 2 s health
// check timeout) and are served as soon as the dead member's node session
// expires (at most Config.SessionTimeout after its last renewal; a command
// waits up to Config.OpenTimeout for it). The bound is therefore about
// SessionTimeout + detection (measured: 2–5 s with a 3 s session timeout).
// Until then Execute fails with a retryable error (see IsRetryable:
// ErrNodeUnavailable, journal.ErrOpenTimeout); with an idempotency key a
// retry never applies a command twice. Two activations of one stream can
// exist briefly (membership changes, a paused member); the journal's lease
// fencing rejects the stale one's appends and it stops. A member that lost
// its node session (paused or cut off past the session timeout) or was
// dropped from the topology fences itself: it leaves the cluster, Execute
// on it fails with ErrNodeFenced, and Runtime.ClusterFenced's channel
// closes so the process can exit and be restarted.
//
// Operations notes: give the Postgres connections an
// idle_in_transaction_session_timeout no longer than the session timeout,
// so a member paused inside a transaction does not hold row locks that
// block the takeover of its streams. When a member joins (or a restarted
// member returns), the others passivate the streams that moved to it, which
// releases their leases, so it serves them at once. DCB commands are
// executed by the member that receives them; each tag is reserved at the
// member hosting its stream.
type ClusterConfig struct {
	// Name is the cluster's name; members with another name never join.
	// Required.
	Name string
	// Host is the address other members reach this one at. Default
	// DefaultClusterHost (127.0.0.1).
	Host string
	// Port is the TCP port of the member's remote endpoint (gRPC). Required:
	// other members and the providers must know it.
	Port int
	// Provider finds the cluster's members: AutoManaged (static peers, for
	// tests and small deployments), Consul, Etcd, or kubernetes.Provider
	// (package runtime/kubernetes). Required.
	Provider ClusterProvider
	// Commands lists the command types that may be executed on streams hosted
	// by another member, with their wire names (use CommandType). A command of
	// an unlisted type is still executed when this member hosts the stream,
	// and otherwise fails with ErrUnknownCommand.
	Commands []CommandType
	// Errors lists domain errors that keep their identity across members:
	// an error returned by Decide on the hosting member that matches Err
	// (errors.Is) matches Err on the calling member too. Journal and runtime
	// sentinels (journal.ErrVersionMismatch, ErrPanic, ...) are always
	// carried.
	Errors []ErrorCode
	// JoinTimeout bounds how long New waits for this member to appear in the
	// cluster's topology. Default DefaultClusterJoinTimeout (15 s).
	JoinTimeout time.Duration
}

// ErrorCode names a domain error for the wire: see ClusterConfig.Errors.
type ErrorCode struct {
	// Code is the error's wire name, unique in the cluster.
	Code string
	// Err is the sentinel that remote errors are matched against with errors.Is.
	Err error
	// Rebuild, when set, makes the calling member's error from the original
	// error's message (for a typed domain error, the same type with that
	// message), so errors.As finds a value carrying the original text. It
	// must return an error that errors.Is matches to Err. Default: the
	// error unwraps to Err itself.
	Rebuild func(message string) error
}

// CommandType is a command's Go type with its wire name; build it with
// ClusterCommand.
type CommandType struct {
	name string
	typ  reflect.Type
}

// ClusterCommand returns the CommandType of the Go type C named name. Every
// member must list the same names for the same types. C must round-trip
// through the runtime's Codec (with JSONCodec: exported fields).
func ClusterCommand[C any](name string) CommandType {
	return CommandType{name: name, typ: reflect.TypeFor[C]()}
}

// ClusterProvider finds a cluster's members. This package implements it with
// AutoManaged, Consul and Etcd; package runtime/kubernetes implements it for
// members that run as Kubernetes pods (kept apart so that only programs that
// use it compile k8s.io/client-go). Any other protoactor-go provider can be
// plugged in by implementing Build.
type ClusterProvider interface {
	// Build returns a new protoactor-go provider for one member, or an error
	// that says which setting is wrong. New calls it once per Runtime; the
	// returned provider is started by the cluster and shut down with it.
	Build() (cluster.ClusterProvider, error)
}

// AutoManaged is a provider for static peers: every member serves a small
// HTTP health endpoint on Port and polls the endpoints of Peers (every
// member, itself included, as "host:port") every RefreshInterval. A member
// whose endpoint does not answer within 2 s leaves the topology. Suited to
// tests and small fixed deployments.
type AutoManaged struct {
	// Port is this member's health endpoint port (bound on every interface).
	// Required.
	Port int
	// Peers are the health endpoints of all members, "host:port". Required.
	Peers []string
	// RefreshInterval is the pause between two polls of the peers. Default
	// DefaultAutoManagedInterval (1 s).
	RefreshInterval time.Duration
}

// Build validates the settings and returns protoactor-go's automanaged
// provider for them.
func (a AutoManaged) Build() (cluster.ClusterProvider, error) {
	if a.Port <= 0 || a.Port > 65535 {
		return nil, fmt.Errorf("runtime: AutoManaged.Port is %d; give the member's health endpoint a TCP port", a.Port)
	}
	if len(a.Peers) == 0 {
		return nil, errors.New("runtime: AutoManaged.Peers is empty; list every member's health endpoint (this one included) as host:port")
	}
	d := a.RefreshInterval
	if d < 0 {
		return nil, fmt.Errorf("runtime: AutoManaged.RefreshInterval is negative (%s); use 0 for the default", d)
	}
	if d == 0 {
		d = DefaultAutoManagedInterval
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
	return q, nil
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

func (c *ClusterConfig) setDefaults() error {
	switch {
	case c.Name == "":
		return errors.New("runtime: ClusterConfig.Name is empty; name the cluster (members with the same name form it)")
	case c.Port <= 0 || c.Port > 65535:
		return fmt.Errorf("runtime: ClusterConfig.Port is %d; give the member a TCP port for its remote endpoint", c.Port)
	case c.Provider == nil:
		return errors.New("runtime: ClusterConfig.Provider is nil; use runtime.AutoManaged for static peers, runtime.Consul, runtime.Etcd, or kubernetes.Provider from package runtime/kubernetes")
	case c.JoinTimeout < 0:
		return fmt.Errorf("runtime: ClusterConfig.JoinTimeout is negative (%s); use 0 for the default", c.JoinTimeout)
	}
	if c.Host == "" {
		c.Host = DefaultClusterHost
	}
	if c.JoinTimeout == 0 {
		c.JoinTimeout = DefaultClusterJoinTimeout
	}
	names := map[string]reflect.Type{}
	types := map[reflect.Type]string{}
	for _, ct := range c.Commands {
		if ct.name == "" || ct.typ == nil {
			return errors.New("runtime: ClusterConfig.Commands has an entry without a name or type; build entries with runtime.ClusterCommand[C](name)")
		}
		if t, dup := names[ct.name]; dup {
			return fmt.Errorf("runtime: ClusterConfig.Commands names %q twice (types %s and %s); give each command type its own name", ct.name, t, ct.typ)
		}
		if n, dup := types[ct.typ]; dup {
			return fmt.Errorf("runtime: ClusterConfig.Commands lists type %s twice (names %q and %q)", ct.typ, n, ct.name)
		}
		names[ct.name], types[ct.typ] = ct.typ, ct.name
	}
	codes := map[string]bool{}
	for _, b := range builtinErrorCodes() {
		codes[b.Code] = true
	}
	for _, e := range c.Errors {
		if e.Code == "" || e.Err == nil {
			return errors.New("runtime: ClusterConfig.Errors has an entry without a code or error; set both")
		}
		if codes[e.Code] {
			return fmt.Errorf("runtime: ClusterConfig.Errors uses code %q twice or a built-in code; pick another", e.Code)
		}
		codes[e.Code] = true
	}
	return nil
}
