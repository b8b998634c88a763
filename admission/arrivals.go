package admission

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Arrivals stamps when each request arrived in the process, so that a
// Limiter judges it by its whole age there: from the moment its connection
// was accepted (the first request of a connection) or its request was read
// (a later request on a kept-alive connection), not from when a handler
// first ran. Under a storm of clients that give up and reconnect, most of a
// request's wait is between the two (a new connection's goroutine waiting
// for a CPU, its request being read), where no handler sees it; a request
// that arrives at the handler already older than MaxWait is then answered
// 503 at once instead of being served for a caller who has most likely
// left. Install both hooks on the server:
//
//	var arrivals admission.Arrivals
//	srv := &http.Server{Handler: limiter.Middleware(mux, nil),
//		ConnContext: arrivals.ConnContext, ConnState: arrivals.ConnState}
//
// The stamps hold for HTTP/1.x; an HTTP/2 request (many per connection at
// once) is judged from the handler's start, as without Arrivals. The zero
// value is ready; safe for concurrent use.
type Arrivals struct {
	conns sync.Map // net.Conn → *arrival
}

// arrival is one connection's pending request's arrival (Unix nanoseconds;
// 0 between requests).
type arrival struct{ at atomic.Int64 }

type arrivalKey struct{}

// ConnContext is the http.Server hook: it stamps the connection's
// acceptance, the arrival of its first request.
func (a *Arrivals) ConnContext(ctx context.Context, c net.Conn) context.Context {
	ar := &arrival{}
	ar.at.Store(time.Now().UnixNano())
	a.conns.Store(c, ar)
	return context.WithValue(ctx, arrivalKey{}, ar)
}

// ConnState is the http.Server hook: it stamps each later request of a
// connection when the server has read it, and forgets closed connections.
func (a *Arrivals) ConnState(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateIdle:
		if v, ok := a.conns.Load(c); ok {
			v.(*arrival).at.Store(0)
		}
	case http.StateActive:
		if v, ok := a.conns.Load(c); ok {
			// The first request keeps the acceptance stamp.
			v.(*arrival).at.CompareAndSwap(0, time.Now().UnixNano())
		}
	case http.StateClosed, http.StateHijacked:
		a.conns.Delete(c)
	}
}

// Arrived returns when r arrived in the process as Arrivals stamped it, or
// the zero time when no Arrivals hooks are installed or r is HTTP/2.
func Arrived(r *http.Request) time.Time {
	if r.ProtoMajor >= 2 {
		return time.Time{}
	}
	ar, ok := r.Context().Value(arrivalKey{}).(*arrival)
	if !ok {
		return time.Time{}
	}
	if at := ar.at.Load(); at != 0 {
		return time.Unix(0, at)
	}
	return time.Time{}
}
