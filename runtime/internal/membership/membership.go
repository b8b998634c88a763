package membership

import (
	"context"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/tagconsistency"
)

// Codec is the runtime's codec of commands and states (runtime.Codec).
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// Node is what a Runtime lends its cluster membership: its stream actors,
// their settings and its codec. The Runtime owns every value; the
// membership must not shut Host down.
type Node struct {
	// Host runs this runtime's stream actors.
	Host *actors.Host
	// Config is Host's configuration, defaults applied (Host.Config()): the
	// one set of settings the engine and the membership share (NodeID,
	// Logger, MeterProvider, the timeouts of Bounds; Resolve returns the
	// registered aggregate of a tag group, nil when there is none yet).
	actors.Config
	// Codec encodes commands and states for the wire.
	Codec Codec
}

// Member is a running cluster membership as the Runtime uses it. All
// methods are safe for concurrent use.
type Member interface {
	// Execute runs cmd on the member hosting stream and waits for its
	// result, as actors.Host.Execute does for a local stream.
	Execute(ctx context.Context, stream journal.StreamID, cmd actors.Command) (actors.Result, error)
	// Owners reserves each DCB tag at the member hosting its stream.
	Owners() tagconsistency.TagOwners
	// FenceError is nil while the member serves, otherwise the error every
	// call fails with: one matching actors.ErrLeaseLost while the member is
	// out of the cluster and rejoining (transient), and one that also
	// matches journal.ErrNodeSuperseded once it is out for good.
	FenceError() error
	// Fenced is closed when the member is out of the cluster for good (a
	// twin node ID); a member that is rejoining does not close it.
	Fenced() <-chan struct{}
	// Address is this member's address ("host:port").
	Address() string
	// Members are the members' addresses as this member sees them, sorted.
	Members() []string
	// Owner is the address of the member hosting stream, "" when none is
	// known.
	Owner(stream journal.StreamID) string
	// Shutdown leaves the cluster: it waits for the requests being served,
	// fails the calls waiting for replies and stops the actor system. The
	// Runtime shuts its Host down afterwards.
	Shutdown()
}
