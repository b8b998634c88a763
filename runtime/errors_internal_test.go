package runtime

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// remote is an error as a cluster member decodes another's
// (cluster.RemoteError): only the sentinels the original matched.
type remote struct{ sentinels []error }

func (r *remote) Error() string   { return "remote" }
func (r *remote) Unwrap() []error { return r.sentinels }

// TestTranslateEveryEngineSentinel: an engine sentinel, as returned locally
// or decoded from another member, also matches the runtime's of the same
// meaning; translating twice wraps once; nil and runtime errors pass as
// they are.
func TestTranslateEveryEngineSentinel(t *testing.T) {
	t.Parallel()
	for _, p := range engineErrors {
		require.NotSame(t, p.engine, p.runtime)
		for _, err := range []error{p.engine, &remote{[]error{errors.New("other"), p.engine}}} {
			got := translate(err)
			require.ErrorIs(t, got, p.runtime)
			require.ErrorIs(t, got, p.engine)
			require.ErrorIs(t, got, err)
			require.Equal(t, err.Error(), got.Error(), "the text is the engine's")
			require.Same(t, got, translate(got), "translated once")
			for _, q := range engineErrors {
				if q.engine != p.engine {
					require.NotErrorIs(t, got, q.runtime)
				}
			}
		}
	}
	require.NoError(t, translate(nil))
	require.Same(t, ErrNodeUnavailable, translate(ErrNodeUnavailable))
}
