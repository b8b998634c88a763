// Command bank is a bank service built on Scribe: accounts are event-sourced
// aggregates (one stream per account, tag "account:<id>"), deposits and
// withdrawals are aggregate commands, and transfers are Dynamic Consistency
// Boundary (DCB) commands over the two accounts' tags. It runs on the
// in-memory journal by default, or durably on Postgres.
//
// Run it:
//
//	go run ./examples/bank                                   # in-memory journal
//	go run ./examples/bank -db postgres://postgres@localhost:5432/bank?sslmode=disable
//
// Flags: -addr (default 127.0.0.1:8080), -db (or SCRIBE_DATABASE_URL; empty
// means the in-memory journal), -schema (default scribe), -node (default the
// host name; keep it stable across restarts so a restarted node takes over its
// streams at once), -otel-stdout (traces and metrics to stdout; OTLP over
// HTTP is used when OTEL_EXPORTER_OTLP_ENDPOINT is set), -log-level.
//
// HTTP API (JSON in and out; amounts are integers in minor units, 1 to 10^12;
// account IDs are 1–64 characters of [A-Za-z0-9_-]):
//
//	POST /accounts                 {"id":"alice"}                       201 {"id","balance","version"}
//	POST /accounts/{id}/deposit    {"amount":100}                       200 {"id","balance","version"}
//	POST /accounts/{id}/withdraw   {"amount":50}                        200 {"id","balance","version"}
//	POST /transfers                {"from":"alice","to":"bob","amount":25}
//	                               200 {"id","from":{"id","balance","version"},"to":{…}}
//	GET  /accounts/{id}            200 {"id","balance","version"}
//	GET  /accounts/{id}/events     200 [{"position","version","type","data","recordedAt"}, …]
//	     ?from=1&limit=1000        one page: versions ≥ from, at most limit (1–10000)
//	GET  /healthz                  200 while the process serves HTTP (liveness)
//	GET  /readyz                   200 while this node can serve: database reachable, node
//	                               session confirmed, node ID not taken (readiness);
//	                               otherwise 503 not_ready with the reason. The
//	                               database probe is reused 1 s while it answers,
//	                               0.1 s while it does not. For 15 min after the
//	                               database was found to have lost acknowledged
//	                               events: 200 {"status":"degraded","degraded":note}
//
// GET /accounts/{id}/events is paginated: while more events follow the page,
// the response has an RFC 8288 Link header naming the next page,
//
//	Link: </accounts/{id}/events?from=<next>&limit=<limit>>; rel="next"
//
// and the last page has none; follow the links to read a whole history. An
// account without events is 404 account_not_found; reading an existing
// account past its last version gives 200 []; an unknown, repeated or
// out-of-range query parameter is 400 invalid_request.
//
// Errors are {"error":"<what went wrong and what to do>","code":"<code>"}:
// 400 invalid_request, invalid_amount, same_account; 404 account_not_found,
// not_found; 405 method_not_allowed; 409 account_exists, insufficient_funds,
// balance_limit; 422 idempotency_key_reused; 431 for headers over 16 KiB;
// 503 with a Retry-After header for every transient failure: unavailable
// (starting, shutting down, timed out), overloaded (-max-inflight requests in
// flight, the account's queue full or kept requests waiting too long, or the
// Request-Timeout too near to be met), database_unavailable, lease_lost
// (this node cannot confirm it owns the account: paused, cut off, or its node
// ID taken by another process), outcome_unknown (the commit was not
// confirmed: retry with the same Idempotency-Key); 500 internal (the body
// never carries internals). Transient failures are logged as one summary line
// per 5 s, not one line per request. X-Correlation-Id is at most 256 bytes of
// printable ASCII (400 otherwise). Request-Timeout, in milliseconds, is how
// long the client waits: the request's deadline (at most the server's 10 s),
// so a command that cannot be answered in time is refused at once.
//
// Every POST accepts an Idempotency-Key header (1–255 printable ASCII
// characters), scoped per account for account operations and across all
// transfers for transfers: the scope of the runtime's durable deduplication,
// so a key means the same before and after a restart. A repeat with the same
// key and the same request returns the first response (status and body, with
// the header Idempotent-Replayed: true) and has no further effect; a
// concurrent repeat waits for the first. A key reused in its scope for a
// different request (another operation or amount) is refused with 422
// idempotency_key_reused. Responses are replayed from a bounded in-memory
// cache (100,000 keys, 24 h); the key also becomes the Scribe command's
// idempotency key, so a retry after a restart or an eviction still appends
// nothing and answers with the state right after the first execution. 5xx
// responses are not remembered: retry them with the same key.
//
// SIGINT or SIGTERM shut down gracefully: stop accepting, finish in-flight
// requests, passivate every actor (runtime shutdown), exit 0.
//
// The loadgen subcommand drives random transfers against a running bank and
// checks its invariants:
//
//	go run ./examples/bank loadgen -url http://127.0.0.1:8080 -workers 32 -duration 10s -accounts 100
package main
