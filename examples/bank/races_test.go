package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUnknownRacesJudgesTheAccessesNotTheCallers: a race between two
// protoactor-go frames of a known kind is known even when Scribe's etcd
// provider is further down one stack; a race with Scribe code at an access,
// or of a kind not listed, is not.
func TestUnknownRacesJudgesTheAccessesNotTheCallers(t *testing.T) {
	report := func(read, write string) string {
		return `==================
WARNING: DATA RACE
Read at 0x00c0003421d8 by goroutine 53:
  ` + read + `
      /x/a.go:30 +0xd9
  github.com/scribe-es/scribe/runtime/cluster/etcd.publish()
      /work/main/runtime/cluster/etcd/member.go:193 +0x3eb

Previous write at 0x00c0003421d8 by goroutine 66:
  ` + write + `
      /x/b.go:39 +0x11a

Goroutine 53 (running) created at:
  github.com/scribe-es/scribe/runtime/cluster/etcd.(*member).start()
==================
`
	}
	known := report("github.com/asynkron/protoactor-go/remote.(*BlockList).BlockedMembers()", "github.com/asynkron/protoactor-go/remote.(*BlockList).Block()")
	require.Empty(t, unknownRaces(t, known))
	ours := report("github.com/scribe-es/scribe/runtime/cluster/etcd.publish()", "github.com/asynkron/protoactor-go/remote.(*BlockList).Block()")
	require.Len(t, unknownRaces(t, ours), 1)
	other := report("github.com/asynkron/protoactor-go/actor.(*PID).ref()", "github.com/asynkron/protoactor-go/actor.(*PID).ref()")
	require.Len(t, unknownRaces(t, other), 1)
	require.Len(t, unknownRaces(t, known+ours), 1)
}
