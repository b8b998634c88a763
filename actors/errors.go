package actors

import (
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/journal"
)

var (
	// ErrShutdown is returned for requests made after Host.Shutdown started.
	ErrShutdown = errors.New("actors: host is shut down; create a new runtime to execute commands")
	// ErrNoAggregate is returned for a command on a stream whose tag group has
	// no registered aggregate.
	ErrNoAggregate = errors.New("actors: no aggregate is registered for the stream's tag group")
	// ErrLeaseLost is returned for a request that arrived while this host
	// could not prove that it still holds its node session: the last
	// successful renewal was sent longer ago than the session timeout minus a
	// safety margin (the process was paused, or the database could not be
	// reached), or another live process opened the same node ID (then the
	// error also matches journal.ErrNodeSuperseded). The request was not
	// decided and nothing was written; nothing was answered from the cache.
	// Retryable: the host renews (or another node takes the stream over).
	ErrLeaseLost = errors.New("actors: the node's lease could not be confirmed valid")
	// ErrOverloaded is returned at once, before anything is queued, when a
	// stream's queue (Config.MaxQueue) or the host's pending requests
	// (Config.MaxPending) are full, when a command's deadline leaves less
	// time than the stream's recent appends take, or when the stream sheds
	// by queueing delay (Config.QueueDelayTarget). Nothing was decided or
	// written. Retryable after a back-off.
	ErrOverloaded = errors.New("actors: overloaded")
	// ErrForeignTags is returned for an aggregate command whose decided
	// events carry tags besides the stream's own. The owners of those tags
	// (their stream actors) would not be reserved, so the append would bypass
	// them and make them fail their next command with a version mismatch.
	// Events with several tags are appended through DCB commands, which
	// reserve every tag's owner. Nothing of the command was appended.
	ErrForeignTags = errors.New("actors: an aggregate's event carries tags of other streams")
)

// sessionLost wraps cause so that errors.Is matches both journal.ErrSessionExpired
// and cause.
func sessionLost(stream journal.StreamID, cause error) error {
	if errors.Is(cause, journal.ErrSessionExpired) {
		return fmt.Errorf("actors: stream %s lost its lease, the actor stopped: %w", stream, cause)
	}
	return fmt.Errorf("actors: stream %s lost its lease, the actor stopped: %w (%w)", stream, journal.ErrSessionExpired, cause)
}

// isSessionError reports a fencing failure.
func isSessionError(err error) bool {
	return errors.Is(err, journal.ErrSessionExpired) || errors.Is(err, journal.ErrInvalidSession)
}
