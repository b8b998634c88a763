package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// member is the provider of one cluster member (protoactor-go's
// cluster.ClusterProvider). The cluster calls StartMember (or StartClient)
// once and Shutdown at least once, from one goroutine; after a start, one
// goroutine watches the members' keys and is the only one to publish the
// topology.
type member struct {
	cfg     clientv3.Config
	base    string
	ttl     int64 // seconds
	timeout time.Duration

	client *clientv3.Client
	lease  clientv3.LeaseID // 0 for a client (not registered)
	cancel context.CancelFunc
	// watching is set once the watch goroutine runs; done is closed when
	// it returned.
	watching bool
	done     chan struct{}
	once     sync.Once
}

// memberKey is the value of a member's key.
type memberKey struct {
	ID    string   `json:"id"`
	Host  string   `json:"host"`
	Port  int32    `json:"port"`
	Kinds []string `json:"kinds"`
}

// StartMember registers this member under a lease kept alive until
// Shutdown and publishes the topology.
func (m *member) StartMember(c *cluster.Cluster) error { return m.start(c, true) }

// StartClient publishes the topology without registering.
func (m *member) StartClient(c *cluster.Cluster) error { return m.start(c, false) }

func (m *member) start(c *cluster.Cluster, register bool) error {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return fmt.Errorf("etcd: this member's address: %w", err)
	}
	// The client is created here rather than in Build: gRPC's logger is a
	// global that the cluster's remote endpoint sets when it starts, and a
	// client's connection reads it from its own goroutines.
	if m.client, err = clientv3.New(m.cfg); err != nil {
		return fmt.Errorf("etcd: connecting to %v: %w", m.cfg.Endpoints, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	prefix := m.base + "/" + c.Config.Name + "/"
	if register {
		self := memberKey{ID: c.ActorSystem.ID, Host: host, Port: int32(port), Kinds: c.GetClusterKinds()}
		if err := m.register(ctx, prefix+self.ID, self); err != nil {
			return fmt.Errorf("etcd: registering member %s:%d under %s at %v: %w", host, port, prefix, m.cfg.Endpoints, err)
		}
	}
	members, rev, err := m.list(ctx, prefix)
	if err != nil {
		return fmt.Errorf("etcd: listing the members under %s at %v: %w", prefix, m.cfg.Endpoints, err)
	}
	publish(c, members)
	m.watching = true
	go m.watch(ctx, c, prefix, members, rev)
	return nil
}

// register puts this member's key under a new lease and keeps the lease
// alive until ctx ends. A lease that lapses anyway (etcd unreachable for
// the TTL) deletes the key: the others, and this member's own watch, drop
// it from the topology, and the cluster rejoins with a new member ID.
func (m *member) register(ctx context.Context, key string, self memberKey) error {
	data, err := json.Marshal(self)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	lease, err := m.client.Grant(cctx, m.ttl)
	if err != nil {
		return err
	}
	m.lease = lease.ID
	if _, err := m.client.Put(cctx, key, string(data), clientv3.WithLease(lease.ID)); err != nil {
		return err
	}
	alive, err := m.client.KeepAlive(ctx, lease.ID)
	if err != nil {
		return err
	}
	go func() {
		for range alive { // the client renews the lease while this drains it
		}
	}()
	return nil
}

// list reads the members under prefix and the revision of that read.
func (m *member) list(ctx context.Context, prefix string) (map[string]*cluster.Member, int64, error) {
	cctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	resp, err := m.client.Get(cctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	members := make(map[string]*cluster.Member, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if mb := decode(kv.Value); mb != nil {
			members[string(kv.Key)] = mb
		}
	}
	return members, resp.Header.Revision, nil
}

// watch follows the keys under prefix from the revision after rev (so no
// change after the list is missed) and publishes each new topology. When
// the watch fails (its revision was compacted), it lists the members again.
func (m *member) watch(ctx context.Context, c *cluster.Cluster, prefix string, members map[string]*cluster.Member, rev int64) {
	defer close(m.done)
	for ctx.Err() == nil {
		for resp := range m.client.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if err := resp.Err(); err != nil {
				c.Logger().Warn("etcd: watching the cluster's members failed; listing them again", slog.Any("error", err))
				break
			}
			for _, ev := range resp.Events {
				key := string(ev.Kv.Key)
				if ev.Type == clientv3.EventTypeDelete {
					delete(members, key)
				} else if mb := decode(ev.Kv.Value); mb != nil {
					members[key] = mb
				}
			}
			rev = resp.Header.Revision
			publish(c, members)
		}
		for ctx.Err() == nil {
			listed, r, err := m.list(ctx, prefix)
			if err == nil {
				members, rev = listed, r
				publish(c, members)
				break
			}
			c.Logger().Warn("etcd: listing the cluster's members failed; retrying", slog.Any("error", err))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second): // the pause before the next attempt
			}
		}
	}
}

// decode returns the member a key's value describes, nil for a value that
// is not one.
func decode(value []byte) *cluster.Member {
	var k memberKey
	if json.Unmarshal(value, &k) != nil || k.ID == "" || k.Host == "" {
		return nil
	}
	kinds := k.Kinds
	if kinds == nil {
		kinds = []string{}
	}
	return &cluster.Member{Id: k.ID, Host: k.Host, Port: k.Port, Kinds: kinds}
}

// publish hands the topology to the cluster, its members in key order.
func publish(c *cluster.Cluster, members map[string]*cluster.Member) {
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	list := make(cluster.Members, 0, len(keys))
	for _, k := range keys {
		list = append(list, members[k])
	}
	c.MemberList.UpdateClusterTopology(list)
}

// Shutdown revokes this member's lease (its key goes at once, so the others
// drop it without waiting for the TTL), stops the watch and closes the
// client. It may be called after a failed start, and more than once.
func (m *member) Shutdown(bool) error {
	var err error
	m.once.Do(func() {
		if m.client == nil {
			return
		}
		if m.lease != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
			if _, rerr := m.client.Revoke(ctx, m.lease); rerr != nil && !strings.Contains(rerr.Error(), "requested lease not found") {
				err = fmt.Errorf("etcd: revoking this member's lease: %w", rerr)
			}
			cancel()
		}
		if m.cancel != nil {
			m.cancel()
			if m.watching {
				<-m.done
			}
		}
		if cerr := m.client.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("etcd: closing the client: %w", cerr)
		}
	})
	return err
}
