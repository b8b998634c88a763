// Package admission keeps a service's goodput up when more requests arrive
// than it can answer in time: an adaptive concurrency limit at the edge,
// with LIFO service under overload.
//
// Queues in front of a saturated service make every request late: each
// waits behind the others until its caller has given up, and the work done
// for it is wasted. A Limiter admits as many requests at once as keep their
// latency near a target (the limit grows by one per limit's worth of fast
// answers and shrinks by a tenth on a slow one, AIMD), lets a few more wait
// a short while, and serves the newest waiter first when a slot frees: the
// newest is the one whose caller most likely still waits, while the oldest
// are shed after MaxWait. Whatever is not admitted is answered at once (an
// HTTP 503 with Retry-After from Middleware), before any work: the caller
// can retry elsewhere or later, and nothing was done that it does not know
// of. The age a request is judged by starts when it arrived in the
// process, where the server's Arrivals hooks stamp it (its connection's
// acceptance, or the read of a kept-alive connection's next request), else
// when it reached the handler: under a storm of reconnecting clients much
// of a request's wait is spent before any handler runs.
//
// Facebook's and Netflix's servers use the same ideas (adaptive LIFO,
// concurrency-limits); Scribe's stream actors shed by queueing delay behind
// it (runtime.ErrOverloaded).
package admission
