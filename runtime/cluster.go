package runtime

import (
	"context"
	"errors"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime/internal/membership"
	"github.com/scribe-es/scribe/tagconsistency"
)

// Cluster makes a Runtime a cluster member. Join takes a type internal to
// Scribe: only *cluster.Config implements it, and a program that does not
// import runtime/cluster (or its providers) compiles no cluster code.
type Cluster interface {
	// Join, called once by New when the stream actors run, starts the
	// membership; a nil Member and error mean a single node.
	Join(ctx context.Context, node membership.Node) (membership.Member, error)
}

// IsRetryable reports whether executing the command again (with the same
// idempotency key if the outcome is unknown) can succeed after err:
// ErrNodeUnavailable, ErrNodeFenced (on another member), ErrLeaseLost,
// ErrOverloaded, and journal's ErrUnavailable, ErrOpenTimeout,
// ErrSessionExpired, ErrInvalidSession and ErrOutcomeUnknown.
func IsRetryable(err error) bool {
	for _, s := range retryable {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

var retryable = []error{ErrNodeUnavailable, ErrNodeFenced, ErrLeaseLost, ErrOverloaded, journal.ErrUnavailable,
	journal.ErrOpenTimeout, journal.ErrSessionExpired, journal.ErrInvalidSession, journal.ErrOutcomeUnknown}

// joinCluster starts the membership Config.Cluster asks for, if any.
func (rt *Runtime) joinCluster(ctx context.Context) error {
	if rt.cfg.Cluster == nil {
		return nil
	}
	m, err := rt.cfg.Cluster.Join(ctx, membership.Node{Host: rt.host, Config: rt.host.Config(), Codec: rt.cfg.Codec})
	if err != nil {
		return err
	}
	rt.cluster = m
	return nil
}

// tagOwners returns the DCB executor's access to the tags' stream actors:
// the local host in single-node mode; in cluster mode, the actor on the
// member hosting each tag's stream.
func (rt *Runtime) tagOwners() tagconsistency.TagOwners {
	if rt.cluster != nil {
		return rt.cluster.Owners()
	}
	return rt.host
}

// ClusterMembers returns the sorted addresses of the members this runtime
// sees; nil in single-node mode and while this member is out of the cluster
// (rejoining, or fenced).
func (rt *Runtime) ClusterMembers() []string {
	c := rt.cluster
	if c == nil || c.FenceError() != nil {
		return nil
	}
	return c.Members()
}

// ClusterAddress returns this member's address ("host:port"), the form of
// ClusterMembers and ClusterOwner; "" in single-node mode.
func (rt *Runtime) ClusterAddress() string {
	if rt.cluster == nil {
		return ""
	}
	return rt.cluster.Address()
}

// ClusterOwner returns the address of the member where Execute on target
// runs, in the topology seen now; "" in single-node mode, while this member
// is out of the cluster, and while no member is known.
func (rt *Runtime) ClusterOwner(target Target) string {
	c := rt.cluster
	if c == nil || c.FenceError() != nil {
		return ""
	}
	return c.Owner(target.Stream())
}

// ClusterFenced returns a channel (nil in single-node mode) closed once this
// member is fenced (ErrNodeFenced): the process should then exit. A lost node
// session does not close it: the member rejoins with a new incarnation, Ready
// reporting ErrLeaseLost meanwhile.
func (rt *Runtime) ClusterFenced() <-chan struct{} {
	if rt.cluster == nil {
		return nil
	}
	return rt.cluster.Fenced()
}
