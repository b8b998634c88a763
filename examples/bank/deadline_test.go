package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/runtime"
)

// deadlineService records the time left before the deadline of each
// deposit's context, and answers err when set.
type deadlineService struct {
	Service
	left chan time.Duration
	err  error
}

func (d *deadlineService) Deposit(ctx context.Context, id string, amount int64, _ CommandOptions) (AccountView, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		d.left <- -1
	} else {
		d.left <- time.Until(deadline)
	}
	if d.err != nil {
		return AccountView{}, d.err
	}
	return AccountView{ID: id, Balance: amount, Version: 1}, nil
}

// TestRequestTimeoutHeaderBecomesTheDeadline: a client's Request-Timeout
// (milliseconds) is the deadline of the request's work, at most the server's
// request timeout; a malformed one is a 400 that names the header, and the
// service is not called.
func TestRequestTimeoutHeaderBecomesTheDeadline(t *testing.T) {
	t.Parallel()
	svc := &deadlineService{left: make(chan time.Duration, 1)}
	var ready atomic.Bool
	ready.Store(true)
	h, err := newAPI(apiConfig{Service: svc, Ready: &ready, RequestTimeout: 10 * time.Second})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	deposit := func(header ...string) *http.Response {
		req, err := http.NewRequest("POST", srv.URL+"/accounts/erin/deposit", strings.NewReader(`{"amount":1}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		for _, v := range header {
			req.Header.Add(requestTimeoutHeader, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}

	require.Equal(t, 200, deposit("50").StatusCode)
	left := <-svc.left
	require.Positive(t, left)
	require.LessOrEqual(t, left, 50*time.Millisecond, "the client's 50 ms are the deadline")

	require.Equal(t, 200, deposit().StatusCode)
	require.Greater(t, <-svc.left, 5*time.Second, "without the header: the server's request timeout")
	require.Equal(t, 200, deposit("3600000").StatusCode)
	left = <-svc.left
	require.Greater(t, left, 5*time.Second)
	require.LessOrEqual(t, left, 10*time.Second, "never longer than the server's request timeout")

	for _, bad := range [][]string{{"0"}, {"-5"}, {"soon"}, {"1.5"}, {"50", "60"}} {
		req, err := http.NewRequest("POST", srv.URL+"/accounts/erin/deposit", strings.NewReader(`{"amount":1}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		for _, v := range bad {
			req.Header.Add(requestTimeoutHeader, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body := readAll(t, resp)
		require.Equal(t, 400, resp.StatusCode, "%v", bad)
		require.Contains(t, body, string(bank.CodeInvalidRequest))
		require.Contains(t, body, requestTimeoutHeader)
	}
	require.Empty(t, svc.left, "a malformed header reaches no service")
}

// TestOverloadedIs503WithRetryAfter: a command the runtime refused as
// overloaded (its queue kept commands waiting too long, or the client's
// deadline was too near) is answered 503 overloaded with Retry-After.
func TestOverloadedIs503WithRetryAfter(t *testing.T) {
	t.Parallel()
	svc := &deadlineService{left: make(chan time.Duration, 1), err: classify(fmt.Errorf("actors: %w: stream account:erin is shedding", runtime.ErrOverloaded))}
	var ready atomic.Bool
	ready.Store(true)
	h, err := newAPI(apiConfig{Service: svc, Ready: &ready})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest("POST", srv.URL+"/accounts/erin/deposit", strings.NewReader(`{"amount":1}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(requestTimeoutHeader, "50")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body := readAll(t, resp)
	require.Equal(t, 503, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Contains(t, body, `"code":"overloaded"`)
	require.NotContains(t, body, "account:erin", "the runtime's message stays inside")
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
