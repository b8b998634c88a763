package erasure_test

import (
	"testing"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/erasure/erasuretest"
)

func TestMemoryKeyStoreConformance(t *testing.T) {
	t.Parallel()
	erasuretest.Run(t, func(t *testing.T) erasure.KeyStore {
		return erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{})
	})
}
