package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// fenceCheckInterval is how often a member compares its node session's
// incarnation with the one it joined with.
const fenceCheckInterval = 100 * time.Millisecond

// watchFence ends this membership when its node session was lost (the
// host opened a new incarnation): the cluster has presumed it dead and
// other members may host its streams, so it must not keep serving them.
// The member (see member) then leaves and rejoins with the new incarnation;
// a twin node ID (journal.ErrNodeSuperseded) ends it for good.
func (c *clusterNode) watchFence() {
	defer close(c.watchDone)
	t := time.NewTicker(fenceCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if err := c.node.Host.Ready(); errors.Is(err, journal.ErrNodeSuperseded) {
			c.fence(fmt.Errorf("%w: %w", runtime.ErrNodeFenced, err))
			return
		}
		if c.check() != nil {
			return
		}
	}
}

// check returns the error this membership's calls fail with, nil while it
// serves. A membership serves only under the node session incarnation it
// joined with: on finding another one it fences itself at once, so no
// request is executed in the window before watchFence notices.
func (c *clusterNode) check() error {
	if err := c.fenceError(); err != nil {
		return err
	}
	if c.node.Host.Node().Incarnation != c.generation {
		c.fence(fmt.Errorf("%w: node %q lost its node session (incarnation %d; paused or cut off past the session timeout); it is rejoining the cluster and executed nothing meanwhile",
			actors.ErrLeaseLost, c.node.NodeID, c.generation))
		return c.fenceError()
	}
	return nil
}

// fence ends this membership: Execute fails with err from now on, Fenced's
// channel closes, and the provider stops announcing it (the others drop it
// from their topology). err matches actors.ErrLeaseLost (the runtime adds
// its ErrLeaseLost) when the member will rejoin, runtime.ErrNodeFenced
// when it stays out for good.
func (c *clusterNode) fence(err error) {
	c.fenceOnce.Do(func() {
		c.fenceErr.Store(&err)
		close(c.fenced)
		go func() {
			defer func() { _ = recover() }()
			_ = c.cl.Config.ClusterProvider.Shutdown(false)
		}()
	})
}

func (c *clusterNode) fenceError() error {
	if p := c.fenceErr.Load(); p != nil {
		return *p
	}
	return nil
}
