package automanaged_test

import (
	"context"
	"log"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/runtime/cluster"
	"github.com/scribe-es/scribe/runtime/cluster/automanaged"
)

// Deposit is a command that crosses between members: its type is named on
// the wire.
type Deposit struct{ Amount int64 }

// startMember is the concepts page's cluster member: two machines, static
// peers.
func startMember(ctx context.Context, j journal.Journal) (*runtime.Runtime, error) {
	rt, err := runtime.New(ctx, runtime.Config{Journal: j, NodeID: "billing-1",
		Cluster: &cluster.Config{
			Name: "billing", Host: "10.0.0.5", Port: 7001,
			Provider: automanaged.Provider{Port: 7101, Peers: []string{"10.0.0.5:7101", "10.0.0.6:7101"}},
			Commands: []cluster.CommandType{cluster.Command[Deposit]("billing.Deposit")},
		}})
	return rt, err
}

// A runtime that is a member of a cluster whose members find each other by
// polling a static list of peers. (It needs those machines, so it is
// compiled but not run by go test.)
func ExampleProvider() {
	ctx := context.Background()
	rt, err := startMember(ctx, memory.New())
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = rt.Shutdown(ctx) }()
}
