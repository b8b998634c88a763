package idempotency

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestEventIDsOfEarlierReleases pins the derivation: events stored by
// earlier releases (which derived IDs in two places) must be found by the
// same IDs, or a retry after an upgrade would execute a command twice.
func TestEventIDsOfEarlierReleases(t *testing.T) {
	agg := uuid.NewSHA1(uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/scribe-es/scribe/idempotency")), []byte("default\x00account:42\x00key-1\x000"))
	require.Equal(t, agg, EventID(Aggregate, "default", "account:42", "key-1", 0))
	dcb := uuid.NewSHA1(uuid.MustParse("6f1d2f8e-3f0a-5c4e-9b8e-2d6a1c7e5b40"), []byte("default\x00transfer\x00key-1\x002"))
	require.Equal(t, dcb, EventID(DCB, "default", "transfer", "key-1", 2))
	require.NotEqual(t, EventID(Aggregate, "p", "x", "k", 0), EventID(DCB, "p", "x", "k", 0), "the kinds never collide")
	require.NotEqual(t, EventID(DCB, "p", "ab", "c", 0), EventID(DCB, "p", "a", "bc", 0), "the separators keep the parts apart")
}
