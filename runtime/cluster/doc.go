// Package cluster is Scribe's cluster mode: runtimes on several machines
// form one protoactor-go cluster (disthash identity lookup), each stream is
// hosted by one member, chosen by rendezvous hashing, and Execute or a DCB
// command on any member reaches it. Commands, replies and reservations
// cross members as protobuf envelopes; deadlines, cancellation and trace
// context cross with them, and journal sentinels and the domain errors
// listed in Config.Errors come back as the same errors.
//
// Set a *Config as runtime.Config.Cluster. Members find each other through
// a Provider, each in a package of its own so that a program compiles only
// the one it imports:
//
//	runtime/cluster/automanaged  static peers polling each other's health endpoints
//	runtime/cluster/consul       a Consul agent's service catalog
//	runtime/cluster/etcd         keys kept alive in etcd
//	runtime/cluster/kubernetes   the pods of a Kubernetes namespace
//
// A program that imports none of these packages (only package runtime)
// compiles no cluster code at all.
package cluster
