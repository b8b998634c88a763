package clusterprovider

import "github.com/asynkron/protoactor-go/cluster"

// Built is a provider built for one member.
type Built struct {
	// Provider is the protoactor-go provider: the cluster starts it and
	// shuts it down with the member.
	Provider cluster.ClusterProvider
}
