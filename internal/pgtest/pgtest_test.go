package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
)

func TestPoolGivesAFreshSchemaAndDropsIt(t *testing.T) {
	url := pgtest.URL(t)
	var schema string
	t.Run("inner", func(t *testing.T) {
		pool, s := pgtest.Pool(t)
		schema = s
		var exists bool
		require.NoError(t, pool.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", s).Scan(&exists))
		require.True(t, exists, "the schema exists during the test")
		_, s2 := pgtest.Pool(t)
		require.NotEqual(t, s, s2, "every call gets its own schema")
	})
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var exists bool
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists))
	require.False(t, exists, "the schema is dropped when the test ends")
}
