package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/internal/pgtest"
)

// TestUnknownAccountsLeaveNoRow: reads, deposits and withdrawals for accounts
// that were never opened answer 404 and leave nothing behind: no row in the
// streams table (no stream lease was taken) and no actor.
func TestUnknownAccountsLeaveNoRow(t *testing.T) {
	t.Parallel()
	pool, schema := pgSchema(t) // drops the key store schema the server creates too
	ts := startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: "unknown-accounts", Logger: testLogger(t), DatabaseURL: pgtest.URL(t), Schema: schema})
	rows := func() int {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{schema, "streams"}.Sanitize()).Scan(&n))
		return n
	}
	for i := range 50 {
		id := fmt.Sprintf("made-up-%d", i)
		requireError(t, ts.request("GET", "/accounts/"+id, ""), 404, bank.CodeAccountNotFound)
		requireError(t, ts.request("POST", "/accounts/"+id+"/deposit", `{"amount":1}`), 404, bank.CodeAccountNotFound)
		requireError(t, ts.request("POST", "/accounts/"+id+"/withdraw", `{"amount":1}`), 404, bank.CodeAccountNotFound)
	}
	require.Equal(t, 0, ts.srv.svc.rt.ActiveStreams(), "no actor outlives a 404")
	require.Equal(t, 0, rows(), "a 404 writes no row")

	// Opening an account still takes its stream's lease and writes its row.
	requireAccount(t, ts.request("POST", "/accounts", `{"id":"real"}`), 201, "real", 0, 1)
	requireAccount(t, ts.request("POST", "/accounts/real/deposit", `{"amount":5}`), 200, "real", 5, 2)
	require.Equal(t, 1, rows())
}
