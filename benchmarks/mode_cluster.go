package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/runtime/cluster"
	"github.com/scribe-es/scribe/runtime/cluster/automanaged"
)

// clusterMode runs the actor mode on a cluster of two runtimes in this
// process, joined over loopback gRPC (protoactor-go cluster, automanaged
// provider) and sharing the cell's journal. Every stream the scenario
// addresses is mapped to an ID hosted by member 0, so that:
//
//   - cluster-local calls Execute on member 0: the command goes straight to
//     the stream's actor, after the cluster's rendezvous lookup;
//   - cluster-remote calls Execute on member 1: every command crosses to
//     member 0 as a protobuf envelope and its reply comes back (transfers:
//     every tag reservation crosses, the decision and append run on
//     member 1).
//
// The difference between the two is the price of a network hop on loopback,
// measured side by side on the same journal and domain.
type clusterMode struct {
	members   [2]*runtime.Runtime
	transfers [2]*runtime.DCBCommand[transfer, transferState]
	caller    int // the member whose Execute the workers call
	scenario  string
	ids       []string // scenario stream i → an ID hosted by member 0
}

// clusterJoinTimeout bounds the two members' start and mutual discovery.
const clusterJoinTimeout = 30 * time.Second

func newClusterMode(ctx context.Context, c cell, b *backend) (mode, error) {
	m := &clusterMode{scenario: c.Scenario}
	ports, err := freePorts(4)
	if err != nil {
		return nil, fmt.Errorf("%s mode: %w", c.Mode, err)
	}
	peers := []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2])), net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3]))}
	name := fmt.Sprintf("benchmarks-%d", time.Now().UnixNano())
	startCtx, cancel := context.WithTimeout(ctx, clusterJoinTimeout)
	defer cancel()
	for i := range m.members {
		rt, err := runtime.New(startCtx, runtime.Config{
			Journal: b.Journal, Sessions: b.Sessions, NodeID: fmt.Sprintf("benchmarks-%d", i),
			Cluster: &cluster.Config{
				Name:     name,
				Port:     ports[i],
				Provider: automanaged.Provider{Port: ports[2+i], Peers: peers, RefreshInterval: 200 * time.Millisecond},
				Commands: []cluster.CommandType{cluster.Command[deposit]("deposit")},
			},
		})
		if err != nil {
			return nil, fmt.Errorf("%s mode: starting member %d: %w", c.Mode, i, errors.Join(err, m.close(context.WithoutCancel(ctx))))
		}
		m.members[i] = rt
		am := &actorMode{rt: rt, scenario: c.Scenario}
		if err := am.register(); err != nil {
			return nil, fmt.Errorf("%s mode: %w", c.Mode, errors.Join(err, m.close(context.WithoutCancel(ctx))))
		}
		m.transfers[i] = am.transfers
	}
	// Member 0 must see both members, and member 1 too, before streams can
	// be mapped: until then each would place every stream on itself.
	for _, rt := range m.members {
		for len(rt.ClusterMembers()) < 2 {
			if err := sleepCtx(startCtx, 20*time.Millisecond); err != nil {
				return nil, fmt.Errorf("%s mode: the two members did not see each other within %v: %w", c.Mode, clusterJoinTimeout,
					errors.Join(err, m.close(context.WithoutCancel(ctx))))
			}
		}
	}
	group := counterGroup
	if c.Scenario == scenarioTransfer {
		group = accountGroup
	}
	m.ids = make([]string, c.Streams)
	host := m.members[0].ClusterAddress()
	for i := range m.ids {
		for k := 0; ; k++ {
			id := strconv.Itoa(i) + "-" + strconv.Itoa(k)
			t := runtime.Target{Aggregate: group, ID: id}
			if m.members[0].ClusterOwner(t) == host && m.members[1].ClusterOwner(t) == host {
				m.ids[i] = id
				break
			}
		}
	}
	if c.Mode == modeClusterRemote {
		m.caller = 1
	}
	return m, nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free loopback port for the cluster: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (m *clusterMode) newWorker(int) worker {
	if m.scenario == scenarioTransfer {
		return clusterTransferWorker{m}
	}
	return m
}

func (m *clusterMode) do(ctx context.Context, t target) (outcome, error) {
	res, err := m.members[m.caller].Execute(ctx, runtime.Target{Aggregate: counterGroup, ID: m.ids[t.A]}, deposit{Amount: 1})
	if err != nil {
		return outcome{}, fmt.Errorf("execute on %s/%s: %w", counterGroup, m.ids[t.A], err)
	}
	return outcome{Commands: 1, Events: len(res.Records)}, nil
}

// clusterTransferWorker executes transfers as DCB commands on the calling
// member.
type clusterTransferWorker struct{ m *clusterMode }

func (w clusterTransferWorker) do(ctx context.Context, t target) (outcome, error) {
	from, to := journal.NewTag(accountGroup, w.m.ids[t.A]), journal.NewTag(accountGroup, w.m.ids[t.B])
	res, err := w.m.transfers[w.m.caller].Execute(ctx, transfer{From: from, To: to, Amount: 1})
	if err != nil {
		return outcome{}, fmt.Errorf("transfer %s→%s: %w", from, to, err)
	}
	return outcome{Commands: 1, Events: len(res.Records)}, nil
}

// close checks that the measurement ran as described (member 1 hosted no
// stream: every command's actor ran on member 0) and shuts both members
// down.
func (m *clusterMode) close(ctx context.Context) error {
	var errs []error
	if m.members[1] != nil {
		if n := m.members[1].ActiveStreams(); n != 0 {
			errs = append(errs, fmt.Errorf("member 1 hosted %d stream actors: the streams were not all on member 0, so the measurement does not show what it claims", n))
		}
	}
	for i := len(m.members) - 1; i >= 0; i-- {
		if m.members[i] != nil {
			errs = append(errs, m.members[i].Shutdown(ctx))
		}
	}
	return errors.Join(errs...)
}
