// Package clusterprovider carries a protoactor-go cluster provider from
// Scribe's provider packages (runtime/cluster/automanaged, consul, etcd and
// runtime/cluster/kubernetes) to its cluster mode (runtime/cluster) without putting
// a protoactor-go type into an exported signature: cluster.Provider's method
// returns a *Built, which only Scribe's packages can name, so that the actor
// engine stays replaceable without breaking users.
package clusterprovider
