// Package etcd is the cluster provider for deployments that run etcd: each
// member keeps a key alive with an etcd lease and watches the keys of the
// others. Set a Provider as runtime/cluster.Config.Provider; only programs
// that import this package compile the etcd client.
package etcd
