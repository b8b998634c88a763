// Package consul is the cluster provider for deployments that run Consul
// (protoactor-go's Consul provider): each member registers a service named
// after the cluster with a TTL health check and watches its healthy
// instances. Set a Provider as runtime/cluster.Config.Provider; only
// programs that import this package compile the Consul client.
package consul
