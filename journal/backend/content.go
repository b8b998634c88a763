package backend

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/scribe-es/scribe/journal"
)

// SameContent reports whether two events prepared by journal.PrepareAppend
// carry the same content: ID, type, schema version, tags, data and metadata
// (an empty partition equals journal.DefaultPartition). Backends use it to
// tell a retried append from a different event reusing a stored ID.
func SameContent(a, b *journal.Event) bool {
	return a.ID == b.ID &&
		a.Type == b.Type &&
		a.SchemaVersion == b.SchemaVersion &&
		slices.Equal(a.Tags, b.Tags) &&
		bytes.Equal(a.Data, b.Data) &&
		sameMetadata(&a.Metadata, &b.Metadata)
}

func sameMetadata(a, b *journal.Metadata) bool {
	return a.CorrelationID == b.CorrelationID &&
		a.CausationID == b.CausationID &&
		a.UserID == b.UserID &&
		a.IdempotencyKey == b.IdempotencyKey &&
		slices.Equal(a.Scopes, b.Scopes) &&
		partitionOrDefault(a.Partition) == partitionOrDefault(b.Partition) &&
		a.CreatedAt.Equal(b.CreatedAt) &&
		a.TraceParent == b.TraceParent &&
		a.TraceState == b.TraceState &&
		a.CommandHash == b.CommandHash
}

func partitionOrDefault(p string) string {
	if p == "" {
		return journal.DefaultPartition
	}
	return p
}

// ValidateNodeSession checks the arguments of Sessions.OpenNode the same way
// for every backend: a node ID of 1 to journal.MaxNodeIDLength bytes of UTF-8
// text without NUL or control characters, and a positive timeout of at least a
// microsecond. The error wraps journal.ErrInvalidSession and says what to use
// instead.
func ValidateNodeSession(nodeID string, timeout time.Duration) error {
	switch {
	case nodeID == "":
		return fmt.Errorf("%w: the node ID is empty; give every runtime a stable node ID (e.g. the pod or host name)", journal.ErrInvalidSession)
	case len(nodeID) > journal.MaxNodeIDLength:
		return fmt.Errorf("%w: the node ID is %d bytes long, over the limit of %d; use a shorter node ID", journal.ErrInvalidSession, len(nodeID), journal.MaxNodeIDLength)
	case !utf8.ValidString(nodeID):
		return fmt.Errorf("%w: the node ID is not valid UTF-8; use UTF-8 text", journal.ErrInvalidSession)
	case strings.IndexFunc(nodeID, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: the node ID %q contains a NUL or control character; use printable text", journal.ErrInvalidSession, nodeID)
	case timeout < time.Microsecond:
		return fmt.Errorf("%w: the node session timeout %s is not positive; use a timeout such as one minute", journal.ErrInvalidSession, timeout)
	}
	return nil
}
