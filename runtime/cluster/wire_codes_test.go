package cluster

import (
	"errors"
	"fmt"
	"testing"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// Every built-in sentinel crosses members: an error wrapping it, encoded by
// one member and decoded by another, still matches it (and only the
// sentinels it matched).
func TestBuiltinErrorsCrossMembers(t *testing.T) {
	c := &clusterNode{byCode: map[string]error{}, rebuild: map[string]func(string) error{}}
	c.codes = builtinErrorCodes()
	seen := map[string]bool{}
	for _, ec := range c.codes {
		if seen[ec.Code] {
			t.Fatalf("code %q is listed twice", ec.Code)
		}
		seen[ec.Code] = true
		c.byCode[ec.Code] = ec.Err
	}
	for _, ec := range c.codes {
		err := c.decodeError(c.encodeError(fmt.Errorf("on the other member: %w", ec.Err)), "10.0.0.2:7000")
		if !errors.Is(err, ec.Err) {
			t.Errorf("%s (%v) does not cross members", ec.Code, ec.Err)
		}
	}
	// The errors a service answers without retry advice are among them.
	for _, want := range []error{journal.ErrArchived, journal.ErrStreamRetired, journal.ErrPartitionMoved,
		runtime.ErrIdempotencyKeyReused, erasure.ErrSubjectErased, erasure.ErrKeyStoreUnavailable} {
		err := c.decodeError(c.encodeError(fmt.Errorf("x: %w", want)), "m")
		if !errors.Is(err, want) {
			t.Errorf("%v does not cross members", want)
		}
		if errors.Is(err, journal.ErrUnavailable) {
			t.Errorf("%v crosses as ErrUnavailable too", want)
		}
	}
}
