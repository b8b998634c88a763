// Package etcd is the cluster provider for deployments that run etcd
// (protoactor-go's etcd provider): each member keeps a key alive with a
// lease and watches the keys of the others. Set a Provider as
// runtime/cluster.Config.Provider; only programs that import this package
// compile the etcd client.
package etcd
