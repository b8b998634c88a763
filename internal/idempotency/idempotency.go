package idempotency

import (
	"strconv"

	"github.com/google/uuid"
)

// The namespaces of the two kinds of idempotent commands.
var (
	// Aggregate is the namespace of aggregate commands' event IDs (scope: the
	// stream's tag).
	Aggregate = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/scribe-es/scribe/idempotency"))
	// DCB is the namespace of DCB commands' event IDs (scope: the command's
	// name).
	DCB = uuid.MustParse("6f1d2f8e-3f0a-5c4e-9b8e-2d6a1c7e5b40")
)

// EventID derives the ID of the index-th event of the command with key, in
// scope (a tag or a command name) of partition, in namespace ns.
func EventID(ns uuid.UUID, partition, scope, key string, index int) uuid.UUID {
	b := make([]byte, 0, len(partition)+len(scope)+len(key)+8)
	b = append(b, partition...)
	b = append(b, 0)
	b = append(b, scope...)
	b = append(b, 0)
	b = append(b, key...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(index), 10)
	return uuid.NewSHA1(ns, b)
}
