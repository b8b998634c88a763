package journal

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
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

// ValidateNodeSession checks the arguments of Sessions.OpenNode the same way
// for every backend: a node ID of 1 to MaxNodeIDLength bytes of UTF-8 text
// without NUL or control characters, and a positive timeout of at least a
// microsecond. The error wraps ErrInvalidSession and says what to use instead.
func ValidateNodeSession(nodeID string, timeout time.Duration) error {
	switch {
	case nodeID == "":
		return fmt.Errorf("%w: the node ID is empty; give every runtime a stable node ID (e.g. the pod or host name)", ErrInvalidSession)
	case len(nodeID) > MaxNodeIDLength:
		return fmt.Errorf("%w: the node ID is %d bytes long, over the limit of %d; use a shorter node ID", ErrInvalidSession, len(nodeID), MaxNodeIDLength)
	case !utf8.ValidString(nodeID):
		return fmt.Errorf("%w: the node ID is not valid UTF-8; use UTF-8 text", ErrInvalidSession)
	case strings.IndexFunc(nodeID, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: the node ID %q contains a NUL or control character; use printable text", ErrInvalidSession, nodeID)
	case timeout < time.Microsecond:
		return fmt.Errorf("%w: the node session timeout %s is not positive; use a timeout such as one minute", ErrInvalidSession, timeout)
	}
	return nil
}
