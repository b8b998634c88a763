package journal

import (
	"context"
	"time"
)

// Sessions grant and fence single-writer leases on streams.
//
// A runtime (a node) opens one NodeSession and renews only it: every stream lease
// it holds is valid exactly while its node session is unexpired, so renewal cost
// does not grow with the number of streams. Expiry is judged by the backend's
// clock (the database clock in Postgres, the injected clock in memory).
//
// Each acquisition of a stream increments the stream's epoch, the fencing token.
// An append that carries a Lease succeeds only if the lease's epoch is the
// stream's current epoch, its holder is the lease's node incarnation, and that
// node session is unexpired — checked atomically with the write.
//
// All methods are safe for concurrent use.
type Sessions interface {
	// OpenNode starts a new incarnation of node nodeID with the given session
	// timeout. A previous incarnation of the same node ID (a crashed process) is
	// superseded at once: its leases are taken over by the next Acquire of this
	// incarnation without waiting for expiry, and its appends are fenced from then.
	OpenNode(ctx context.Context, nodeID string, timeout time.Duration) (NodeSession, error)
	// RenewNode extends the node session by its timeout from now. It fails with
	// ErrSessionExpired when the session already expired, or ErrInvalidSession
	// when a newer incarnation of the node superseded it or it was closed.
	RenewNode(ctx context.Context, node NodeSession) (NodeSession, error)
	// CloseNode ends the node session and releases every lease it holds.
	CloseNode(ctx context.Context, node NodeSession) error
	// Acquire takes the lease of a stream for a node session, waiting up to wait
	// while another live node holds it; then it fails with ErrOpenTimeout. A
	// stream held by an expired or superseded session, by an older incarnation of
	// the same node ID, or by nobody is granted at once with a higher epoch.
	Acquire(ctx context.Context, node NodeSession, stream StreamID, wait time.Duration) (Lease, error)
	// Release gives the lease up so the next Acquire is granted at once. Releasing
	// a lease that is no longer current is not an error.
	Release(ctx context.Context, lease Lease) error
}

// NodeSession is one incarnation of a node's session.
type NodeSession struct {
	NodeID      string
	Incarnation uint64 // increases with every OpenNode of the same NodeID
	Timeout     time.Duration
	// ExpiresAt is the expiry the backend granted, by the backend's clock
	// (informational: renew well before it).
	ExpiresAt time.Time
}

// Lease is a node's hold on one stream: the fence its appends carry.
type Lease struct {
	Stream      StreamID
	NodeID      string
	Incarnation uint64
	Epoch       uint64 // the stream's fencing token; increases with every Acquire
}

// MaxNodeIDLength bounds a node ID, in bytes.
const MaxNodeIDLength = 256
