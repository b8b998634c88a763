// Package racefree runs a package's own tests again in a build without the
// race detector, for the tests that cannot run under it.
//
// protoactor-go's cluster and remote packages have data races of their own
// (remote.BlockList read without its lock by the member list; gRPC's global
// logger replaced by every Remote.Start), so the race detector fails any test
// that runs two cluster members in one process. Such tests carry the build
// tag !race; a test built with the race tag calls [Run] so that a race-enabled
// run (CI's) still executes them. Test code only: production packages never
// import it.
package racefree
