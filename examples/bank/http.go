package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/scribe-es/scribe/admission"
	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// HTTP-layer error codes (the domain's codes are in package bank).
const (
	// codeIdempotencyKeyReused: the Idempotency-Key was first used with a
	// different request (another operation, account or amount). HTTP 422.
	codeIdempotencyKeyReused bank.Code = "idempotency_key_reused"
	// codeNotFound: no such route. HTTP 404.
	codeNotFound bank.Code = "not_found"
	// codeMethodNotAllowed: the route exists but not for this method. HTTP 405.
	codeMethodNotAllowed bank.Code = "method_not_allowed"
	// codeUnavailable: the service is starting, shutting down or timed out;
	// the request may be retried (with the same Idempotency-Key). HTTP 503.
	codeUnavailable bank.Code = "unavailable"
	// codeOverloaded: too many requests are in flight or queued at the
	// account, the account sheds requests it cannot answer in time, or the
	// request's Request-Timeout is too near; nothing was done. HTTP 503
	// with Retry-After.
	codeOverloaded bank.Code = "overloaded"
	// codeDatabaseUnavailable: the database cannot be reached; nothing was
	// done. HTTP 503 with Retry-After.
	codeDatabaseUnavailable bank.Code = "database_unavailable"
	// codeLeaseLost: this node cannot prove it still owns the account's
	// stream (paused, cut off from the database, or another process runs
	// with its node ID); nothing was done or read. HTTP 503 with Retry-After.
	codeLeaseLost bank.Code = "lease_lost"
	// codeOutcomeUnknown: the command was sent to the database but its
	// commit was not confirmed; it may or may not have taken effect: retry
	// with the same Idempotency-Key to learn which. HTTP 503 with Retry-After.
	codeOutcomeUnknown bank.Code = "outcome_unknown"
	// codeKeyStoreUnavailable: the customers' key store (erasure) is
	// missing (restored without it, or -keys-db names another database),
	// holds no key for the data, or cannot be reached; the sealed customer
	// data cannot be read and nothing was done. HTTP 503 with Retry-After:
	// retry once the key store is restored or reachable.
	codeKeyStoreUnavailable bank.Code = "key_store_unavailable"
	// codeNotReady: /readyz while the node cannot serve. HTTP 503.
	codeNotReady bank.Code = "not_ready"
	// codeInternal: a server fault; the body says nothing more. HTTP 500.
	codeInternal bank.Code = "internal"
)

// errUnavailable marks a service error as transient (HTTP 503): the request
// may be retried.
var errUnavailable = errors.New("service unavailable")

// requestTimeoutHeader names the header in which a client says how long it
// waits for the answer, in milliseconds: the request's work gets that
// deadline (at most apiConfig.RequestTimeout), and the stream actors refuse
// at once, 503 overloaded, a command they could not answer before it.
const requestTimeoutHeader = "Request-Timeout"

// requestTimeout returns the time r's work may take: the Request-Timeout
// header's, at most limit; limit without the header. A malformed header is
// an error that names it and says what to send.
func requestTimeout(r *http.Request, limit time.Duration) (time.Duration, error) {
	values := r.Header.Values(requestTimeoutHeader)
	switch len(values) {
	case 0:
		return limit, nil
	case 1:
	default:
		return 0, invalidRequest(fmt.Sprintf("the %s header is given %d times; give it once: how long you wait for the answer, in milliseconds", requestTimeoutHeader, len(values)))
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(values[0]), 10, 64)
	if err != nil || ms < 1 {
		return 0, invalidRequest(fmt.Sprintf("the %s header is %s; give how long you wait for the answer as a positive whole number of milliseconds, such as 50",
			requestTimeoutHeader, strconv.Quote(truncate(values[0], 64))))
	}
	if ms >= limit.Milliseconds() {
		return limit, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// maxIdempotencyKeyLength bounds the Idempotency-Key header.
const maxIdempotencyKeyLength = 255

// statusOf maps an error code to its HTTP status.
func statusOf(code bank.Code) int {
	switch code {
	case bank.CodeInvalidRequest, bank.CodeInvalidAmount, bank.CodeSameAccount:
		return http.StatusBadRequest
	case bank.CodeAccountNotFound, bank.CodeCustomerNotFound, codeNotFound:
		return http.StatusNotFound
	case bank.CodeAccountExists, bank.CodeInsufficientFunds, bank.CodeBalanceLimit, bank.CodeCustomerErased:
		return http.StatusConflict
	case codeIdempotencyKeyReused:
		return http.StatusUnprocessableEntity
	case codeAccountRetired, codeHistoryArchived, codeOutcomeArchived:
		return http.StatusGone
	case codeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case codeUnavailable, codeOverloaded, codeDatabaseUnavailable, codeKeyStoreUnavailable, codeLeaseLost, codeOutcomeUnknown, codeNotReady:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// errorBody is the JSON body of every error response.
type errorBody struct {
	Error string    `json:"error"`
	Code  bank.Code `json:"code"`
}

// apiConfig configures the HTTP API.
type apiConfig struct {
	Service Service
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Ready reports whether the process is up (/healthz answers 200): set once
	// serving starts, cleared when shutdown starts.
	Ready *atomic.Bool
	// Readiness reports why the node cannot serve now (database unreachable,
	// lease lapsed, twin node ID, fenced), nil when it can: /readyz. Default:
	// ready whenever Ready is set.
	Readiness func(context.Context) error
	// Degraded returns a note for /readyz while the node serves but an
	// operator must look at something (the store lost acknowledged events),
	// "" otherwise. Default: never degraded.
	Degraded func() string
	// StoreEpoch is the runtime's store epoch (runtime.StoreEpoch): the
	// replay cache replays a 2xx response only under the epoch it was
	// executed in. Default: a constant.
	StoreEpoch func() uint64
	// MaxInFlight bounds the requests served at once (health checks aside):
	// the adaptive limit's maximum (see limitInFlight). Default
	// defaultMaxInFlight.
	MaxInFlight int
	// RequestTimeout bounds each request's work (default 10 s).
	RequestTimeout time.Duration
	// IdempotencyEntries and IdempotencyTTL bound the replay cache (defaults
	// 100,000 entries and 24 h).
	IdempotencyEntries int
	IdempotencyTTL     time.Duration
	// TracerProvider and MeterProvider default to no-op providers.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Read serves GET /accounts and GET /events/stream (nil: they answer 404).
	Read *readSide
	// Closing, when closed, ends the open event streams (a graceful
	// shutdown would otherwise wait for them).
	Closing <-chan struct{}
}

type api struct {
	svc         Service
	log         *slog.Logger
	ready       *atomic.Bool
	readiness   func(context.Context) error
	degraded    func() string
	admit       *admission.Limiter
	maxInFlight int
	shed        *rateLimitedLog
	timeout     time.Duration
	idem        *idempotencyCache
	read        *readSide
	streams     chan struct{}
	closing     <-chan struct{}
}

// newAPI returns the bank's HTTP handler.
func newAPI(cfg apiConfig) (http.Handler, error) {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.IdempotencyEntries <= 0 {
		cfg.IdempotencyEntries = 100_000
	}
	if cfg.IdempotencyTTL <= 0 {
		cfg.IdempotencyTTL = 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = defaultMaxInFlight
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = tracenoop.NewTracerProvider()
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = metricnoop.NewMeterProvider()
	}
	a := &api{
		svc:       cfg.Service,
		log:       cfg.Logger,
		ready:     cfg.Ready,
		readiness: cfg.Readiness,
		// At least 64 requests at once whatever the latency (a busy or slow
		// machine is no reason to refuse an ordinary load); past that the
		// limit adapts up to MaxInFlight.
		admit:       admission.New(admission.Config{MaxLimit: cfg.MaxInFlight, MinLimit: min(64, cfg.MaxInFlight), InitialLimit: min(64, cfg.MaxInFlight)}),
		maxInFlight: cfg.MaxInFlight,
		shed:        newRateLimitedLog(cfg.Logger, retryableLogInterval, time.Now),
		timeout:     cfg.RequestTimeout,
		idem:        newIdempotencyCache(cfg.IdempotencyEntries, cfg.IdempotencyTTL, time.Now, cfg.StoreEpoch),
		degraded:    cfg.Degraded,
		read:        cfg.Read,
		streams:     make(chan struct{}, maxEventStreams),
		closing:     cfg.Closing,
	}

	mux := http.NewServeMux()
	route := func(pattern, path, allow string, h func(http.ResponseWriter, *http.Request) response) {
		mux.Handle(pattern, a.instrument(h))
		// The same path with any other method: 405 with a JSON body.
		mux.Handle(path, a.instrument(func(w http.ResponseWriter, r *http.Request) response {
			w.Header().Set("Allow", allow)
			return errorResponse(codeMethodNotAllowed, fmt.Sprintf("%s %s is not supported; use %s", r.Method, path, allow))
		}))
	}
	route("POST /accounts", "/accounts", "GET, HEAD, POST", a.createAccount)
	mux.Handle("GET /accounts", a.instrument(a.listAccounts))
	// Long-lived: no request timeout, its own limit (maxEventStreams).
	mux.HandleFunc("GET /events/stream", a.eventStream)
	route("POST /accounts/{id}/deposit", "/accounts/{id}/deposit", "POST", a.deposit)
	route("POST /accounts/{id}/withdraw", "/accounts/{id}/withdraw", "POST", a.withdraw)
	route("POST /transfers", "/transfers", "POST", a.transfer)
	route("GET /accounts/{id}", "/accounts/{id}", "GET, HEAD", a.getAccount)
	route("GET /accounts/{id}/events", "/accounts/{id}/events", "GET, HEAD", a.getEvents)
	route("DELETE /customers/{id}", "/customers/{id}", "DELETE", a.eraseCustomer)
	route("GET /healthz", "/healthz", "GET, HEAD", a.healthz)
	route("GET /readyz", "/readyz", "GET, HEAD", a.readyz)
	mux.Handle("/", a.instrument(func(w http.ResponseWriter, r *http.Request) response {
		return errorResponse(codeNotFound, fmt.Sprintf("no route for %s %s; see the README for the API", r.Method, truncate(r.URL.Path, 200)))
	}))
	// otelhttp makes the server span ("POST /transfers": method and the
	// mux's route pattern, http.route) and the semantic-convention metrics
	// (http.server.request.duration and the body sizes); it runs outside
	// the in-flight limit, so refused requests are measured too.
	return otelhttp.NewHandler(a.limitInFlight(mux), "bank",
		otelhttp.WithTracerProvider(cfg.TracerProvider),
		otelhttp.WithMeterProvider(cfg.MeterProvider),
		otelhttp.WithPropagators(propagation.TraceContext{})), nil
}

// limitInFlight admits requests through an adaptive concurrency limit
// (package admission): at least 64 and at most MaxInFlight at once, fewer
// than the most while answers are slower than the limiter's target; a request finding no slot waits a
// few tens of milliseconds, newest first, and is then answered 503
// overloaded with Retry-After, before any work. A request whose caller
// left while it waited gets no answer. Health checks and event streams are
// never refused.
func (a *api) limitInFlight(next http.Handler) http.Handler {
	overloaded := a.instrument(func(http.ResponseWriter, *http.Request) response {
		resp := errorResponse(codeOverloaded, fmt.Sprintf("the server is at its concurrency limit (%d now, %d at most); nothing was done: retry after the Retry-After delay", a.admit.Stats().Limit, a.maxInFlight))
		resp.retryAfter = 1
		return resp
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/events/stream" {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		release, err := a.admit.Acquire(r.Context())
		if err != nil {
			if r.Context().Err() != nil {
				return // the caller left while it waited: nothing was done
			}
			a.shed.note(string(codeOverloaded), errors.New("concurrency limit reached"))
			overloaded.ServeHTTP(w, r)
			return
		}
		defer func() { release(time.Since(start)) }()
		next.ServeHTTP(w, r)
	})
}

// instrument wraps a handler with a request timeout, an access log line and
// panic recovery, writes its response, and annotates the request's server
// span (otelhttp's): a failure (5xx) gets error.type, the response's error
// code, on the span and on http.server.request.duration; a refusal the
// caller caused (4xx, such as insufficient_funds) keeps the span's status
// Unset and is recorded as a bank.rejection event with bank.error.code.
func (a *api) instrument(h func(http.ResponseWriter, *http.Request) response) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		route := r.Pattern
		ctx := r.Context()
		span := trace.SpanFromContext(ctx)
		// otelhttp names the span after the mux's pattern once the handler
		// returns, but records http.route only from the pattern known when
		// the span starts (none, before the mux): set it here.
		if _, path, ok := strings.Cut(route, " "); ok {
			span.SetAttributes(attribute.String("http.route", path))
		} else if route != "" {
			span.SetAttributes(attribute.String("http.route", route))
		}
		timeout, badTimeout := requestTimeout(r, a.timeout)
		if badTimeout != nil {
			timeout = a.timeout
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		r = r.WithContext(ctx)

		resp := func() (resp response) {
			if badTimeout != nil {
				return a.clientError(badTimeout)
			}
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					a.log.ErrorContext(ctx, "handler panicked", "route", route, "panic", fmt.Sprint(v))
					resp = errorResponse(codeInternal, internalMessage)
				}
			}()
			return h(w, r)
		}()

		if len(resp.body) > 0 {
			w.Header().Set("Content-Type", "application/json")
		}
		if resp.replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		if resp.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(resp.retryAfter))
		}
		if sc := span.SpanContext(); sc.HasTraceID() {
			w.Header().Set("Trace-Id", sc.TraceID().String())
		}
		w.WriteHeader(resp.status)
		if r.Method != http.MethodHead {
			_, _ = w.Write(resp.body)
		}

		code := ""
		if resp.status >= 400 {
			var eb errorBody
			if json.Unmarshal(resp.body, &eb) == nil {
				code = string(eb.Code)
			}
		}
		elapsed := time.Since(start)
		switch {
		case resp.status >= 500 && code != "":
			errType := attribute.String("error.type", code)
			span.SetAttributes(errType)
			if l, ok := otelhttp.LabelerFromContext(r.Context()); ok {
				l.Add(errType)
			}
		case code != "":
			span.SetAttributes(attribute.String("bank.error.code", code))
			span.AddEvent("bank.rejection", trace.WithAttributes(attribute.String("bank.error.code", code)))
		}
		// A 503 is logged by the rate-limited summary (failure), not once
		// per request: an outage must not flood the log.
		level := slog.LevelDebug
		if resp.status >= 500 && resp.status != http.StatusServiceUnavailable {
			level = slog.LevelWarn
		}
		a.log.Log(ctx, level, "request", "method", r.Method, "route", route, "path", r.URL.Path,
			"status", resp.status, "code", code, "duration_ms", float64(elapsed.Microseconds())/1000)
	})
}

const internalMessage = "internal error; the request may or may not have taken effect: retry it with the same Idempotency-Key, and report the Trace-Id header if it keeps failing"

func jsonResponse(status int, v any) response {
	body, err := json.Marshal(v)
	if err != nil {
		return errorResponse(codeInternal, internalMessage)
	}
	return response{status: status, body: append(body, '\n')}
}

func errorResponse(code bank.Code, msg string) response {
	body, _ := json.Marshal(errorBody{Error: msg, Code: code})
	return response{status: statusOf(code), body: append(body, '\n')}
}

// failure turns a service error into a response, after classify: domain
// errors keep their code and message; transient errors become 503; known
// server faults are logged and become a 500 server_fault without retry
// advice; anything else is logged and becomes a 500 internal. No 5xx body
// says anything about internals.
func (a *api) failure(ctx context.Context, op string, err error) response {
	err = classify(err)
	var be *bank.Error
	if errors.As(err, &be) {
		return errorResponse(be.Code, be.Message)
	}
	span := trace.SpanFromContext(ctx)
	span.RecordError(err)
	var fault *serverFault
	if errors.As(err, &fault) {
		a.log.ErrorContext(ctx, "request failed", "op", op, "err", err)
		return errorResponse(codeServerFault, serverFaultMessage)
	}
	if errors.Is(err, errUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		resp := retryableResponse(err)
		a.shed.note(op, err)
		return resp
	}
	a.log.ErrorContext(ctx, "request failed", "op", op, "err", err)
	return errorResponse(codeInternal, internalMessage)
}

// retryableResponse is the 503 of a transient failure: a code that says what
// happened, a message that says what to do, and a Retry-After in seconds.
func retryableResponse(err error) response {
	code, after, msg := codeUnavailable, 1, "the service could not complete the request in time or is shutting down; retry it with the same Idempotency-Key"
	switch {
	case errors.Is(err, erasure.ErrKeyMissing):
		code, after, msg = codeKeyStoreUnavailable, 5, "the key store holds no key for this account's sealed customer data: it is not the key store the data was written with (a journal restored without its key store, or -keys-db and -keys name another one); nothing was done: restore the key store from its backup or check -keys-db and -keys, then retry"
	case errors.Is(err, erasure.ErrKeyStoreUnavailable) && errors.Is(err, journal.ErrUnavailable):
		code, after, msg = codeKeyStoreUnavailable, 2, "the key store's database cannot be reached, so the sealed customer data cannot be read; nothing was done: check -keys-db and that its database runs, then retry after the Retry-After delay"
	case errors.Is(err, erasure.ErrKeyStoreUnavailable):
		code, after, msg = codeKeyStoreUnavailable, 5, "the key store is missing (its schema or tables do not exist: a journal restored without its key store?), so the sealed customer data cannot be read; nothing was done: restore the key store from its backup or check -keys-db and -keys, then retry"
	case errors.Is(err, journal.ErrOutcomeUnknown):
		code, msg = codeOutcomeUnknown, "the request reached the database but its commit was not confirmed, so it may or may not have taken effect; retry it with the same Idempotency-Key to learn which (it is never applied twice)"
	case errors.Is(err, runtime.ErrOverloaded):
		code, msg = codeOverloaded, "the account has more requests waiting than it can answer in time (its queue is full or kept requests waiting too long), or the request's deadline (Request-Timeout) was too near to be met; nothing was done: retry after the Retry-After delay"
	case errors.Is(err, journal.ErrPartitionMoving):
		code, after, msg = codeUnavailable, 2, "the account's partition is moving to another database and is fenced for the cut-over; nothing was done: retry after the Retry-After delay with the same Idempotency-Key"
	case errors.Is(err, journal.ErrUnavailable):
		code, after, msg = codeDatabaseUnavailable, 2, "the database cannot be reached; nothing was done: retry after the Retry-After delay with the same Idempotency-Key"
	case errors.Is(err, journal.ErrNodeSuperseded):
		code, msg = codeLeaseLost, "this node stopped serving: another process runs with its node ID; nothing was done: retry on another node"
	case errors.Is(err, runtime.ErrLeaseLost):
		code, msg = codeLeaseLost, "this node cannot confirm it still owns the account (it was paused or cut off from the database); nothing was done or read: retry after the Retry-After delay"
	}
	resp := errorResponse(code, msg)
	resp.retryAfter = after
	return resp
}

// command runs a state-changing request through the idempotency cache when
// it carries an Idempotency-Key. fingerprint identifies the operation and its
// parameters; run executes it.
//
// scope is the key's scope, the same as the runtime's durable one, so a key
// means the same before and after a restart: "account:<id>" for account
// operations (the runtime dedups keys per account stream) and "transfers"
// for transfers (the runtime dedups a transfer's key across all transfers).
func (a *api) command(r *http.Request, op, scope, fingerprint string, run func(context.Context, CommandOptions) (any, error)) response {
	ctx := r.Context()
	key := r.Header.Get("Idempotency-Key")
	correlation := r.Header.Get("X-Correlation-Id")
	if err := validateCorrelationID(correlation); err != nil {
		return errorResponse(bank.CodeInvalidRequest, err.Error())
	}
	opts := CommandOptions{IdempotencyKey: key, CorrelationID: correlation}
	exec := func() response {
		v, err := run(ctx, opts)
		if err != nil {
			return a.failure(ctx, op, err)
		}
		status := http.StatusOK
		if op == "create" {
			status = http.StatusCreated
		}
		resp := jsonResponse(status, v)
		if av, ok := v.(AccountView); ok && av.Customer != nil && (av.Customer.Name != "" || av.Customer.Email != "") {
			resp.private = true
		}
		return resp
	}
	if key == "" {
		return exec()
	}
	if err := validateIdempotencyKey(key); err != nil {
		return errorResponse(bank.CodeInvalidRequest, err.Error())
	}
	sum := sha256.Sum256([]byte(fingerprint))
	resp, outcome, err := a.idem.do(ctx, scope+"\x00"+key, hex.EncodeToString(sum[:]), exec)
	switch {
	case err != nil:
		return a.failure(ctx, op, err)
	case outcome == idemMismatch:
		return errorResponse(codeIdempotencyKeyReused, fmt.Sprintf("Idempotency-Key %s was already used for a different request; use a new key for a new request, and the same key only to retry the identical request", strconv.Quote(key)))
	case outcome == idemReplayed:
		trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("idempotency.replayed", true))
		resp.replayed = true
	}
	return resp
}

// validateCorrelationID checks the X-Correlation-Id header: at most
// journal.MaxMetadataIDLength bytes of printable ASCII (it is stored on
// every event the request causes and indexed).
func validateCorrelationID(id string) error {
	if len(id) > journal.MaxMetadataIDLength {
		return fmt.Errorf("the X-Correlation-Id header is %d bytes long; use at most %d bytes of printable ASCII (a UUID is a good correlation ID)", len(id), journal.MaxMetadataIDLength)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return fmt.Errorf("the X-Correlation-Id header contains a byte other than printable ASCII (0x%02X) at byte %d; use printable ASCII", id[i], i)
		}
	}
	return nil
}

func validateIdempotencyKey(key string) error {
	if len(key) > maxIdempotencyKeyLength {
		return fmt.Errorf("the Idempotency-Key header is %d characters long; use at most %d (a UUID is a good key)", len(key), maxIdempotencyKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return fmt.Errorf("the Idempotency-Key header contains a character other than printable ASCII at byte %d; use a UUID or another printable ASCII token", i)
		}
	}
	return nil
}

// pathAccountID reads and validates the {id} path segment.
func pathAccountID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if err := bank.ValidateAccountID(id); err != nil {
		return "", err
	}
	return id, nil
}

func (a *api) clientError(err error) response {
	var be *bank.Error
	if errors.As(err, &be) {
		return errorResponse(be.Code, be.Message)
	}
	return errorResponse(bank.CodeInvalidRequest, err.Error())
}

func (a *api) createAccount(w http.ResponseWriter, r *http.Request) response {
	fields, err := readObject(w, r, "id", "customer")
	if err != nil {
		return a.clientError(err)
	}
	id, err := accountIDField(fields, "id")
	if err != nil {
		return a.clientError(err)
	}
	customer, err := customerField(fields, "customer")
	if err != nil {
		return a.clientError(err)
	}
	fp := "create\x00" + id
	if customer != nil {
		// The fingerprint is hashed before it is kept: no personal data in
		// the idempotency cache's keys.
		fp += "\x00" + customer.ID + "\x00" + customer.Name + "\x00" + customer.Email
	}
	return a.command(r, "create", "account:"+id, fp, func(ctx context.Context, opts CommandOptions) (any, error) {
		return a.svc.CreateAccount(ctx, id, customer, opts)
	})
}

// eraseCustomer serves DELETE /customers/{id}: 204 when the customer is
// erased (also again), 404 for a customer no account was opened for.
func (a *api) eraseCustomer(w http.ResponseWriter, r *http.Request) response {
	id := r.PathValue("id")
	if err := bank.ValidateCustomer(bank.Customer{ID: id}); err != nil {
		return a.clientError(err)
	}
	if err := a.svc.EraseCustomer(r.Context(), id); err != nil {
		return a.failure(r.Context(), "erase customer", err)
	}
	return response{status: http.StatusNoContent}
}

func (a *api) deposit(w http.ResponseWriter, r *http.Request) response {
	return a.amountCommand(w, r, "deposit", a.svc.Deposit)
}

func (a *api) withdraw(w http.ResponseWriter, r *http.Request) response {
	return a.amountCommand(w, r, "withdraw", a.svc.Withdraw)
}

func (a *api) amountCommand(w http.ResponseWriter, r *http.Request, op string, call func(context.Context, string, int64, CommandOptions) (AccountView, error)) response {
	id, err := pathAccountID(r)
	if err != nil {
		return a.clientError(err)
	}
	fields, err := readObject(w, r, "amount")
	if err != nil {
		return a.clientError(err)
	}
	amount, err := bank.ParseAmount(fields["amount"])
	if err != nil {
		return a.clientError(err)
	}
	fp := op + "\x00" + id + "\x00" + strconv.FormatInt(amount, 10)
	return a.command(r, op, "account:"+id, fp, func(ctx context.Context, opts CommandOptions) (any, error) {
		return call(ctx, id, amount, opts)
	})
}

func (a *api) transfer(w http.ResponseWriter, r *http.Request) response {
	fields, err := readObject(w, r, "from", "to", "amount")
	if err != nil {
		return a.clientError(err)
	}
	from, err := accountIDField(fields, "from")
	if err != nil {
		return a.clientError(err)
	}
	to, err := accountIDField(fields, "to")
	if err != nil {
		return a.clientError(err)
	}
	amount, err := bank.ParseAmount(fields["amount"])
	if err != nil {
		return a.clientError(err)
	}
	if from == to {
		return errorResponse(bank.CodeSameAccount, fmt.Sprintf("cannot transfer from account %q to itself; give two different accounts", from))
	}
	fp := "transfer\x00" + from + "\x00" + to + "\x00" + strconv.FormatInt(amount, 10)
	return a.command(r, "transfer", "transfers", fp, func(ctx context.Context, opts CommandOptions) (any, error) {
		return a.svc.Transfer(ctx, from, to, amount, opts)
	})
}

func (a *api) getAccount(_ http.ResponseWriter, r *http.Request) response {
	id, err := pathAccountID(r)
	if err != nil {
		return a.clientError(err)
	}
	v, err := a.svc.Account(r.Context(), id)
	if err != nil {
		return a.failure(r.Context(), "get", err)
	}
	return jsonResponse(http.StatusOK, v)
}

// getEvents serves one page of an account's events. When more events follow
// the page it sets an RFC 8288 Link header with rel="next" whose target asks
// for the next page with the same limit; the last page has no Link.
func (a *api) getEvents(w http.ResponseWriter, r *http.Request) response {
	id, err := pathAccountID(r)
	if err != nil {
		return a.clientError(err)
	}
	from, limit, err := eventsQuery(r)
	if err != nil {
		return a.clientError(err)
	}
	events, more, err := a.svc.Events(r.Context(), id, from, limit)
	if err != nil {
		return a.failure(r.Context(), "events", err)
	}
	if events == nil {
		events = []EventView{}
	}
	if more && len(events) > 0 {
		next := events[len(events)-1].Version + 1
		w.Header().Set("Link", fmt.Sprintf(`</accounts/%s/events?from=%d&limit=%d>; rel="next"`, url.PathEscape(id), next, limit))
	}
	return jsonResponse(http.StatusOK, events)
}

// maxEventsFrom is the largest from a request may give: stream versions are
// stored as signed 64-bit integers.
const maxEventsFrom = math.MaxInt64

// eventsQuery reads the query of GET /accounts/{id}/events: from, the first
// stream version to return (default 1), and limit, the page size (default
// defaultEventsPage). A malformed query, another parameter, a repeated one
// or a value out of range is an invalid_request error that names the
// parameter, its value and what to give instead.
func eventsQuery(r *http.Request) (from uint64, limit int, err error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return 0, 0, invalidRequest(fmt.Sprintf("the query string %s is malformed (%v); give from=<version>&limit=<n>",
			strconv.Quote(truncate(r.URL.RawQuery, 200)), err))
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if name != "from" && name != "limit" {
			return 0, 0, invalidRequest(fmt.Sprintf("unknown query parameter %s; this request accepts only \"from\" (the first stream version, default 1) and \"limit\" (the page size, default %d)",
				strconv.Quote(truncate(name, 64)), defaultEventsPage))
		}
		if n := len(q[name]); n > 1 {
			return 0, 0, invalidRequest(fmt.Sprintf("query parameter %q is given %d times; give it once", name, n))
		}
	}
	from, limit = 1, defaultEventsPage
	if v, ok := q["from"]; ok {
		n, err := strconv.ParseUint(v[0], 10, 64)
		if err != nil || n < 1 || n > maxEventsFrom {
			return 0, 0, invalidRequest(fmt.Sprintf("query parameter \"from\" is %s; give a stream version: an integer from 1 to %d",
				strconv.Quote(truncate(v[0], 64)), uint64(maxEventsFrom)))
		}
		from = n
	}
	if v, ok := q["limit"]; ok {
		n, err := strconv.ParseUint(v[0], 10, 64)
		if err != nil || n < 1 || n > maxEventsPage {
			return 0, 0, invalidRequest(fmt.Sprintf("query parameter \"limit\" is %s; give a page size: an integer from 1 to %d",
				strconv.Quote(truncate(v[0], 64)), maxEventsPage))
		}
		limit = int(n)
	}
	return from, limit, nil
}

// healthz is the liveness check: 200 while the process serves HTTP, whatever
// the state of the database or the node's leases (restarting the process
// would not fix those: /readyz reports them).
func (a *api) healthz(_ http.ResponseWriter, _ *http.Request) response {
	if a.ready == nil || !a.ready.Load() {
		return errorResponse(codeUnavailable, "the service is starting or shutting down; retry shortly")
	}
	return jsonResponse(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is the readiness check: 200 only while this node can serve
// requests: started, the database reachable, its node session confirmed and
// its node ID not taken by another process. Otherwise 503 not_ready with the
// reason, so a load balancer sends traffic elsewhere. A node that serves but
// found the store behind what it had acknowledged (an asynchronous failover,
// a restored backup) answers 200 with status "degraded" and the note: the
// node serves correctly from the store as it now is, so taking it out of the
// load balancer would not help, but an operator must look at the loss.
func (a *api) readyz(_ http.ResponseWriter, r *http.Request) response {
	if a.ready == nil || !a.ready.Load() {
		return errorResponse(codeNotReady, "the service is starting or shutting down; retry shortly")
	}
	if a.readiness != nil {
		if err := a.readiness(r.Context()); err != nil {
			resp := errorResponse(codeNotReady, "not ready: "+err.Error())
			resp.retryAfter = 1
			return resp
		}
	}
	if a.degraded != nil {
		if note := a.degraded(); note != "" {
			return jsonResponse(http.StatusOK, map[string]string{"status": "degraded", "degraded": note})
		}
	}
	return jsonResponse(http.StatusOK, map[string]string{"status": "ready"})
}

// eventView renders a stored record of account id's stream.
func eventView(rec journal.Record, id string) EventView {
	return EventView{
		Position:   rec.Position.String(),
		Version:    rec.Version(bank.AccountTag(id)),
		Type:       rec.Type,
		Data:       rec.Data,
		RecordedAt: rec.RecordedAt,
	}
}
