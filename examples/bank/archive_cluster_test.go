//go:build !nocluster

package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/internal/pgtest"
)

// TestRetiredAccountAnswersGoneInACluster: on a two-member cluster, an
// account retired while its actor runs on either member answers a deposit
// through either member 410 account_retired: the tombstone's error crosses
// members (withBankTypes), never a 500 "retry".
func TestRetiredAccountAnswersGoneInACluster(t *testing.T) {
	t.Parallel()
	_, schema := pgSchema(t)
	url := pgtest.URL(t)
	procs := startBankClusterIn(t, 2, url, schema)
	hc := &http.Client{Timeout: 20 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const accounts = 8 // spread over both members
	for a := range accounts {
		id := fmt.Sprintf("gone%d", a)
		status, err := bankPost(ctx, hc, "http://"+procs[a%2].addr+"/accounts", "open-"+id, map[string]string{"id": id}, &AccountView{})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, status, id)
		status, err = bankPost(ctx, hc, "http://"+procs[(a+1)%2].addr+"/accounts/"+id+"/deposit", "dep-"+id, map[string]int64{"amount": 5}, &AccountView{})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, id)
	}
	store := openStore(t, url, schema)
	for a := range accounts {
		_, err := storeAdmin(t, store).RetireStream(t.Context(), streamOf(fmt.Sprintf("gone%d", a)))
		require.NoError(t, err)
	}
	for a := range accounts {
		id := fmt.Sprintf("gone%d", a)
		for m, p := range procs {
			var e struct{ Error, Code string }
			status, err := bankPost(ctx, hc, "http://"+p.addr+"/accounts/"+id+"/deposit", fmt.Sprintf("late-%s-%d", id, m), map[string]int64{"amount": 1}, &e)
			require.NoError(t, err)
			require.Equal(t, http.StatusGone, status, "%s through member %d: %+v", id, m+1, e)
			require.Equal(t, string(codeAccountRetired), e.Code)
			require.NotRegexp(t, retryAdvice, e.Error)
		}
	}
}
