package snapshots

import (
	"fmt"

	"github.com/scribe-es/scribe/journal"
)

// Validate reports whether s can be saved: its stream needs a tag and its
// Version must be at least 1. The error wraps ErrInvalidArgument and says what
// to fix. Store implementations call it at the start of Save.
func (s Snapshot) Validate() error {
	if err := ValidateStream(s.Stream); err != nil {
		return err
	}
	if s.Version == 0 {
		return fmt.Errorf("%w: snapshot of stream %s has version 0; a snapshot holds the state after at least one event, so its Version must be ≥ 1", ErrInvalidArgument, s.Stream)
	}
	return nil
}

// ValidateStream reports whether stream names a stream a Store can hold: its
// tag must not be empty (an empty partition means journal.DefaultPartition).
// The error wraps ErrInvalidArgument.
func ValidateStream(stream journal.StreamID) error {
	if stream.Tag == "" {
		return fmt.Errorf("%w: stream tag is empty (partition %q); name the stream's tag, such as \"account:42\"", ErrInvalidArgument, stream.Normalize().Partition)
	}
	return nil
}

// ValidatePrune reports whether Prune(stream, keep) is valid: the stream
// passes ValidateStream and keep is not negative. The error wraps
// ErrInvalidArgument.
func ValidatePrune(stream journal.StreamID, keep int) error {
	if err := ValidateStream(stream); err != nil {
		return err
	}
	if keep < 0 {
		return fmt.Errorf("%w: prune of stream %s with keep %d; keep is how many of the newest snapshots to retain and must be ≥ 0", ErrInvalidArgument, stream, keep)
	}
	return nil
}
