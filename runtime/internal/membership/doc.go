// Package membership is the seam between package runtime and its cluster
// mode (package runtime/cluster): what a Runtime lends a cluster membership
// (Node) and what the membership gives back (Member). It imports no
// protoactor-go cluster or remote package, so that package runtime, which
// depends on it, stays free of them: a program pays for cluster mode only
// when it imports runtime/cluster.
//
// Being internal, the package cannot be imported outside Scribe's module,
// so runtime.Cluster, whose method takes a Node, can only be implemented by
// Scribe's own packages.
package membership
