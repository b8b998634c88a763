package cluster

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/scribe-es/scribe/internal/clusterprovider"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/runtime/internal/membership"
)

// Defaults of Config.
const (
	DefaultHost        = "127.0.0.1"
	DefaultJoinTimeout = 15 * time.Second
)

// Config turns a Runtime into a member of a cluster of runtimes
// (protoactor-go cluster, disthash identity lookup): every stream is hosted by
// exactly one member, chosen by rendezvous hashing over the members, and
// Execute on any member is routed to it. Commands and replies cross members as
// protobuf envelopes whose payloads the runtime's Codec encodes, so every
// command type sent to another member must be listed in Commands.
//
// Failover: when a member dies, its streams move to the survivors once the
// provider notices (automanaged.Provider: within RefreshInterval plus its
// 2 s health check timeout) and are served as soon as the dead member's node session
// expires (at most Config.SessionTimeout after its last renewal; a command
// waits up to runtime.Config.OpenTimeout for it). The bound is therefore about
// SessionTimeout + detection (measured: 2–5 s with a 3 s session timeout).
// Until then Execute fails with a retryable error (see runtime.IsRetryable:
// runtime.ErrNodeUnavailable, journal.ErrOpenTimeout); with an idempotency key a
// retry never applies a command twice. Two activations of one stream can
// exist briefly (membership changes, a paused member); the journal's lease
// fencing rejects the stale one's appends and it stops.
//
// Rejoin: a member that lost its node session (paused, or cut off from the
// database, past the session timeout; a database failover that outlasts
// it) or that the others dropped from their topology leaves the cluster
// and rejoins on its own: it stops every stream actor of its old
// membership, waits until the runtime has reopened its node session (a new
// incarnation), and joins again under a new protoactor-go member ID on the
// same address (it takes about a second, plus the provider's detection, once
// the cause has healed). Its streams are then recovered from the journal;
// nothing is served from the old membership's state. While it is out,
// Execute on it and Runtime.Ready fail with an error matching
// runtime.ErrLeaseLost (retryable) that says it is rejoining, and
// ClusterMembers is nil. Only a twin (another live process with the same
// NodeID, journal.ErrNodeSuperseded) stays out for good: Execute fails with
// runtime.ErrNodeFenced and Runtime.ClusterFenced's channel closes so the
// process can exit. A member logs one warning when it leaves and one info
// line with its new incarnation when it has rejoined, and counts rejoins
// in MetricRejoins.
//
// Operations notes: give the Postgres connections an
// idle_in_transaction_session_timeout no longer than the session timeout,
// so a member paused inside a transaction does not hold row locks that
// block the takeover of its streams. When a member joins (or a restarted
// member returns), the others passivate the streams that moved to it, which
// releases their leases, so it serves them at once. DCB commands are
// executed by the member that receives them; each tag is reserved at the
// member hosting its stream.
//
// Set a *Config as runtime.Config.Cluster; a nil *Config means a single
// node. Config itself imports no provider: import the one the deployment
// uses (runtime/cluster/automanaged, runtime/cluster/consul,
// runtime/cluster/etcd or runtime/cluster/kubernetes).
type Config struct {
	// Name is the cluster's name; members with another name never join.
	// Required.
	Name string
	// Host is the address other members reach this one at. Default
	// DefaultHost (127.0.0.1).
	Host string
	// Port is the TCP port of the member's remote endpoint (gRPC). Required:
	// other members and the providers must know it.
	Port int
	// Provider finds the cluster's members: automanaged.Provider (static
	// peers, for tests and small deployments), consul.Provider,
	// etcd.Provider, or kubernetes.Provider (package runtime/cluster/kubernetes).
	// Required.
	Provider Provider
	// Commands lists the command types that may be executed on streams hosted
	// by another member, with their wire names (build them with Command). A command of
	// an unlisted type is still executed when this member hosts the stream,
	// and otherwise fails with runtime.ErrUnknownCommand.
	Commands []CommandType
	// Errors lists domain errors that keep their identity across members:
	// an error returned by Decide on the hosting member that matches Err
	// (errors.Is) matches Err on the calling member too. Journal and runtime
	// sentinels (journal.ErrVersionMismatch, runtime.ErrPanic, ...) are always
	// carried.
	Errors []ErrorCode
	// JoinTimeout bounds how long New waits for this member to appear in the
	// cluster's topology. Default DefaultJoinTimeout (15 s).
	JoinTimeout time.Duration
}

// ErrorCode names a domain error for the wire: see Config.Errors.
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
// Command.
type CommandType struct {
	name string
	typ  reflect.Type
}

// Command returns the CommandType of the Go type C named name. Every
// member must list the same names for the same types. C must round-trip
// through the runtime's Codec (with runtime.JSONCodec: exported fields).
func Command[C any](name string) CommandType {
	return CommandType{name: name, typ: reflect.TypeFor[C]()}
}

// Provider finds a cluster's members. Packages runtime/cluster/automanaged,
// runtime/cluster/consul, runtime/cluster/etcd and runtime/cluster/kubernetes
// implement it, each in a package of its own so that a program compiles
// only the provider it imports. The method's result is internal to Scribe:
// the actor engine's types never appear in Scribe's API, so only Scribe's
// packages implement Provider.
type Provider interface {
	// Build validates the provider's settings and returns a new provider
	// for one member, or an error that says which setting is wrong. Join
	// calls it once per Runtime, and again each time the member rejoins the
	// cluster; the cluster starts the built provider and shuts it down when
	// the member leaves.
	Build() (*clusterprovider.Built, error)
}

// Join implements runtime.Cluster: runtime.New calls it once to start the
// membership after its stream actors. A nil *Config joins nothing (a single
// node).
func (c *Config) Join(ctx context.Context, node membership.Node) (membership.Member, error) {
	if c == nil {
		return nil, nil
	}
	m, err := newMember(ctx, node, *c)
	if err != nil {
		return nil, err
	}
	return m, nil
}

var _ runtime.Cluster = (*Config)(nil)

func (c *Config) setDefaults() error {
	switch {
	case c.Name == "":
		return errors.New("cluster: Config.Name is empty; name the cluster (members with the same name form it)")
	case c.Port <= 0 || c.Port > 65535:
		return fmt.Errorf("cluster: Config.Port is %d; give the member a TCP port for its remote endpoint", c.Port)
	case c.Provider == nil:
		return errors.New("cluster: Config.Provider is nil; use automanaged.Provider for static peers, or the consul, etcd or kubernetes Provider (packages under runtime/cluster)")
	case c.JoinTimeout < 0:
		return fmt.Errorf("cluster: Config.JoinTimeout is negative (%s); use 0 for the default", c.JoinTimeout)
	}
	if c.Host == "" {
		c.Host = DefaultHost
	}
	if c.JoinTimeout == 0 {
		c.JoinTimeout = DefaultJoinTimeout
	}
	names := map[string]reflect.Type{}
	types := map[reflect.Type]string{}
	for _, ct := range c.Commands {
		if ct.name == "" || ct.typ == nil {
			return errors.New("cluster: Config.Commands has an entry without a name or type; build entries with cluster.Command[C](name)")
		}
		if t, dup := names[ct.name]; dup {
			return fmt.Errorf("cluster: Config.Commands names %q twice (types %s and %s); give each command type its own name", ct.name, t, ct.typ)
		}
		if n, dup := types[ct.typ]; dup {
			return fmt.Errorf("cluster: Config.Commands lists type %s twice (names %q and %q)", ct.typ, n, ct.name)
		}
		names[ct.name], types[ct.typ] = ct.typ, ct.name
	}
	codes := map[string]bool{}
	for _, b := range builtinErrorCodes() {
		codes[b.Code] = true
	}
	for _, e := range c.Errors {
		if e.Code == "" || e.Err == nil {
			return errors.New("cluster: Config.Errors has an entry without a code or error; set both")
		}
		if codes[e.Code] {
			return fmt.Errorf("cluster: Config.Errors uses code %q twice or a built-in code; pick another", e.Code)
		}
		codes[e.Code] = true
	}
	return nil
}
