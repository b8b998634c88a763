// Package clustertest holds the tests of Scribe's cluster mode: members in
// one process on the memory journal (routing, typed errors across members,
// deadlines), and multi-process clusters on Postgres started by go test
// (load across members, SIGKILL and SIGSTOP of a member). The test binary
// re-executes itself as a cluster member process; see node_test.go.
//
// There is no goleak check here: after a member shuts down, protoactor-go's
// remote endpoint leaves gRPC client connections reconnecting to the other
// members, and its log throttles run for one more period.
package clustertest
