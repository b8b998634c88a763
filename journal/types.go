package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// TypeVersion names one schema version of an event type.
type TypeVersion struct {
	Type    string
	Version int
}

// String renders the type version as "Type v2".
func (tv TypeVersion) String() string { return fmt.Sprintf("%s v%d", tv.Type, tv.Version) }

// TypeSchema is the shape a build declared for one event type version: a
// JSON Schema document its payloads conform to.
type TypeSchema struct {
	TypeVersion
	// Schema is the JSON Schema document (a JSON object). Two schemas are the
	// same when they are equal as JSON values (key order and white space do
	// not matter).
	Schema json.RawMessage
	// RecordedAt is when the schema was first recorded; set by the store,
	// ignored by RecordTypes.
	RecordedAt time.Time
}

// BuildTypes describes one build of a service as the type registry records
// it: what it writes and what it can read.
type BuildTypes struct {
	// Build identifies the build (the runtime derives it from the types it
	// registers and the older versions it upcasts). Required.
	Build string
	// Node is the node ID that recorded the build last.
	Node string
	// Writes are the type versions the build registers, which it appends.
	Writes []TypeVersion
	// Reads are the type versions the build can read (decode, upcasting),
	// among those it knew of when it recorded itself: its own, those stored
	// and those recorded by other builds.
	Reads []TypeVersion
	// FirstRecordedAt and LastRecordedAt are set by the store.
	FirstRecordedAt, LastRecordedAt time.Time
}

// RecordedTypes is everything a type registry holds.
type RecordedTypes struct {
	// Schemas, ordered by type (byte order) then version.
	Schemas []TypeSchema
	// Builds, ordered by Build.
	Builds []BuildTypes
}

// StoredVersion counts the stored events of one type version.
type StoredVersion struct {
	TypeVersion
	Count uint64
}

// TypeRegistry is a journal's optional record of the event types and shapes
// that builds register (find it with a type assertion). The memory and
// Postgres journals implement it, and so does a partitioned router, on
// every member. Every method is safe for concurrent use.
//
// The registry and the counts cover the stored (hot) events only: archived
// events are never read by recovery and are not counted.
type TypeRegistry interface {
	// RecordTypes records schemas and build, atomically: a schema whose type
	// version is already recorded with the same schema is left as it is;
	// one recorded with a different schema fails the call with a
	// *TypeConflictError (ErrTypeConflict) and nothing is written. The
	// build's row is replaced (its first recording time kept).
	RecordTypes(ctx context.Context, schemas []TypeSchema, build BuildTypes) error
	// RecordedTypes returns every recorded schema and build.
	RecordedTypes(ctx context.Context) (RecordedTypes, error)
	// StoredVersions returns the type versions of the stored events,
	// ordered by type then version; its cost does not grow with the number
	// of events of a version (the Postgres journal reads an index).
	StoredVersions(ctx context.Context) ([]TypeVersion, error)
	// CountStoredVersions counts the stored events per type version, in the
	// same order; its cost grows with the number of events.
	CountStoredVersions(ctx context.Context) ([]StoredVersion, error)
}

// ErrTypeConflict: a type version is already recorded with a different
// schema. Not retryable: register the new shape at a new version (with an
// upcaster from the recorded one), or restore the recorded shape.
var ErrTypeConflict = errors.New("journal: event type recorded with another schema")

// TypeConflictError details ErrTypeConflict.
type TypeConflictError struct {
	TypeVersion
	// Recorded is the schema the registry holds, Given the one refused.
	Recorded, Given json.RawMessage
}

func (e *TypeConflictError) Error() string {
	return fmt.Sprintf("journal: event type %q version %d is recorded with another schema; register the new shape as version %d (with an upcaster) or restore the recorded one",
		e.Type, e.Version, e.Version+1)
}

// Is matches ErrTypeConflict.
func (e *TypeConflictError) Is(target error) bool { return target == ErrTypeConflict }

// SameSchema reports whether two JSON Schema documents are equal as JSON
// values; a document that is not valid JSON equals nothing.
func SameSchema(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ca, err1 := json.Marshal(x)
	cb, err2 := json.Marshal(y)
	return err1 == nil && err2 == nil && string(ca) == string(cb)
}

// CompareTypeVersions orders type versions by type (byte order), then
// version.
func CompareTypeVersions(a, b TypeVersion) int {
	switch {
	case a.Type < b.Type:
		return -1
	case a.Type > b.Type:
		return 1
	}
	return a.Version - b.Version
}
