package cluster

import (
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/scribe-es/scribe/actors"
)

// onEvent follows the cluster topology: it keeps the rendezvous table that
// says which member hosts a stream, and fails the calls waiting on members
// that left.
func (c *clusterNode) onEvent(ev any) {
	topo, ok := ev.(*cluster.ClusterTopology)
	if !ok {
		return
	}
	rdv := cluster.NewRendezvous()
	rdv.UpdateMembers(topo.Members)
	addrs := make([]string, 0, len(topo.Members))
	for _, m := range topo.Members {
		addrs = append(addrs, m.Address())
	}
	slices.Sort(addrs)
	c.addrs.Store(&addrs)
	c.members.Store(rdv)
	self := false
	for _, m := range topo.Members {
		if m.Address() == c.system.Address() {
			self = true
			c.joinOnce.Do(func() { close(c.joined) })
		}
	}
	select {
	case <-c.joined:
		if !self {
			// The others dropped this member (it missed their health checks)
			// and block its member ID for good: this membership can no
			// longer host streams. The member rejoins with a new one.
			c.fence(fmt.Errorf("%w: member %s (node %q) was dropped from cluster %q by its provider (missed health checks, or its pod stopped); it is rejoining and executed nothing meanwhile",
				actors.ErrLeaseLost, c.system.Address(), c.node.NodeID, c.cfg.Name))
		}
	default:
	}
	if self {
		c.serveAsync(c.handOver)
	}
	for _, m := range topo.Left {
		addr := m.Address()
		c.log.Warn("member left the cluster", "member", addr)
		c.failCalls(func(cl *call) bool { return cl.target.Address == addr }, errMemberLeft)
		c.mu.Lock()
		for id, ab := range c.abandoned {
			if ab.pid.Address == addr {
				delete(c.abandoned, id)
			}
		}
		c.mu.Unlock()
		c.serveAsync(func() { c.cancelHeldBy(addr) })
	}
}

// handOver passivates the local actors of streams that another member
// hosts now (a member joined), so their new host acquires their leases at
// once instead of waiting for them to go idle.
func (c *clusterNode) handOver() {
	moved := 0
	for _, stream := range c.node.Host.Streams() {
		if c.owner(stream.String()) != c.self() && c.node.Host.Passivate(stream) {
			moved++
		}
	}
	if moved > 0 {
		c.log.Info("handed streams over to their new hosts", "streams", moved)
	}
}

func (c *clusterNode) failCalls(match func(*call) bool, reason error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, cl := range c.calls {
		if match(cl) {
			delete(c.calls, id)
			cl.reply <- reason
		}
	}
}

// owner returns the address of the member hosting stream, "" when the
// topology is empty.
func (c *clusterNode) owner(identity string) string {
	rdv := c.members.Load()
	if rdv == nil {
		return ""
	}
	return rdv.GetByClusterIdentity(cluster.NewClusterIdentity(identity, streamKind))
}

// pid returns the grain of identity, activating it on its member.
func (c *clusterNode) pid(identity string) *actor.PID {
	if p, ok := c.cl.PidCache.Get(identity, streamKind); ok {
		return p
	}
	p := c.cl.Get(identity, streamKind)
	if p != nil {
		c.cl.PidCache.Set(identity, streamKind, p)
	}
	return p
}

func (c *clusterNode) memberAddrs() []string {
	p := c.addrs.Load()
	if p == nil {
		return nil
	}
	return slices.Clone(*p)
}
