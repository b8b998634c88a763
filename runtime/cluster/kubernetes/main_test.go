package kubernetes

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves goroutines behind: the provider's
// discovery goroutine must end with Shutdown. Ignored: protoactor-go's log
// throttles, which the in-process members' gossip starts and which end 60 s
// after the member stopped (actor/throttler.go). Unlike runtime/clustertest,
// whose killed member processes leave gRPC connections reconnecting, the
// members here all shut down, so nothing else is expected.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.NewGossipActor.NewThrottleWithLogger.func2.1"),
	)
}
