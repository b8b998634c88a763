package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/partitioned"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/tagconsistency"
)

// Error codes of the answers classify gives to library errors that no retry
// overcomes.
const (
	// codeAccountRetired: the account's stream was retired behind a
	// tombstone (scribe retire-stream): it takes no more requests, ever.
	// Its history stays readable (GET /accounts/{id}/events). HTTP 410.
	codeAccountRetired bank.Code = "account_retired"
	// codeHistoryArchived: the request needs events of the account that
	// were archived (scribe archive), and this request cannot read them.
	// HTTP 410.
	codeHistoryArchived bank.Code = "history_archived"
	// codeOutcomeArchived: the Idempotency-Key was executed before, but its
	// first outcome can no longer be rebuilt; it is not executed again.
	// HTTP 410.
	codeOutcomeArchived bank.Code = "outcome_archived"
	// codeServerFault: the server cannot carry out the request because of
	// a fault on its side that a retry does not fix (configuration, a bug,
	// altered data); it is logged. HTTP 500.
	codeServerFault bank.Code = "server_fault"
)

// serverFaultMessage is the body of every server_fault answer: it says
// nothing about internals and does not advise a retry.
const serverFaultMessage = "the server cannot carry out this request because of a fault on its side that trying again will not fix; report the Trace-Id header to the operator"

// serverFault is a library error classify found final and caused by the
// server (its configuration, code or data): HTTP 500 server_fault, logged.
type serverFault struct{ err error }

func (e *serverFault) Error() string { return "server fault: " + e.err.Error() }

// Unwrap returns the library error.
func (e *serverFault) Unwrap() error { return e.err }

// retryable are the library errors a retry (with the same Idempotency-Key)
// overcomes: the node, its lease, the database, the key store or the
// stream is busy or unreachable for now, the outcome of a write is unknown,
// or a DCB decision met a concurrent write (its actors re-read, so a retry
// decides afresh). runtime.IsRetryable is consulted as well.
var retryable = []error{
	journal.ErrOpenTimeout, journal.ErrSessionExpired, journal.ErrInvalidSession, journal.ErrOutcomeUnknown,
	journal.ErrUnavailable, journal.ErrStoreNotOpen, journal.ErrVersionMismatch, journal.ErrAppendConditionFailed,
	journal.ErrNodeSuperseded, journal.ErrLeaseRevoked, journal.ErrPartitionMoving,
	runtime.ErrShutdown, runtime.ErrReservationTimeout, runtime.ErrConflict, runtime.ErrOverloaded,
	runtime.ErrLeaseLost, runtime.ErrNodeUnavailable, runtime.ErrNodeFenced, tagconsistency.ErrReservationLost,
	// The engines' own sentinels, which the runtime's above also match.
	actors.ErrShutdown, actors.ErrLeaseLost, actors.ErrOverloaded,
	tagconsistency.ErrConflict, tagconsistency.ErrReservationTimeout,
	// The key store is missing, unreachable or not the one the data was
	// sealed with: a retry succeeds once the operator restores it.
	erasure.ErrKeyStoreUnavailable, erasure.ErrKeyMissing,
	// The read model's runner lost or waits for its lease, or was paused
	// or superseded: a later read is served again.
	projection.ErrFenced, projection.ErrSuperseded, projection.ErrPaused,
	context.DeadlineExceeded, context.Canceled,
}

// serverFaults are the library errors that no retry overcomes and that the
// client did not cause: the service's configuration or registrations, a
// bug (an invalid event, query or command, a panic), altered or missing
// data, or a partition map that is out of date.
var serverFaults = []error{
	journal.ErrConfiguration, journal.ErrInvalidEvent, journal.ErrInvalidQuery, journal.ErrNotFound,
	journal.ErrSnapshotRequired, journal.ErrPartitionMoved, journal.ErrTypeConflict,
	runtime.ErrRegistration, runtime.ErrNotOneEvent, runtime.ErrUnknownAggregate, runtime.ErrUnknownEvent, runtime.ErrForeignTags,
	runtime.ErrPanic, runtime.ErrInvalidCommand, runtime.ErrUnknownCommand, runtime.ErrNoKeyStore,
	actors.ErrNoAggregate, actors.ErrForeignTags, tagconsistency.ErrInvalidCommand,
	erasure.ErrInvalidArgument, erasure.ErrCorrupt, erasure.ErrNotErasing,
	partitioned.ErrCrossPartition, partitioned.ErrPerDatabase, partitioned.ErrUnknownPartition, partitioned.ErrUnknownMember,
	projection.ErrNoDeadLetter, projection.ErrNoRowsTx, projection.ErrSlicingChanged,
}

// classify turns an error of the library into the bank's answer, so that
// every status's advice is true:
//   - domain errors (*bank.Error) and errors already classified pass;
//   - errors a retry overcomes (retryable) wrap errUnavailable: HTTP 503,
//     "retry with the same Idempotency-Key";
//   - a retired account, archived history and a reused idempotency key
//     become *bank.Error answers (410, 410, 422) that say no retry helps;
//   - the other known library errors (serverFaults) are a *serverFault:
//     HTTP 500 server_fault, without retry advice;
//   - anything else passes unchanged: HTTP 500 internal, whose message says
//     the request may or may not have taken effect (retry to find out).
//
// The returned error still matches the library error (errors.Is).
func classify(err error) error {
	var fault *serverFault
	switch {
	case err == nil:
		return nil
	case bank.CodeOf(err) != "", errors.Is(err, errUnavailable), errors.As(err, &fault):
		return err
	// A retired stream's *ArchivedError matches ErrArchived too: first.
	case errors.Is(err, journal.ErrStreamRetired):
		return fmt.Errorf("%w: %w", &bank.Error{Code: codeAccountRetired, Message: retiredMessage(err)}, err)
	case errors.Is(err, journal.ErrArchived):
		return fmt.Errorf("%w: %w", &bank.Error{Code: codeHistoryArchived, Message: archivedMessage(err)}, err)
	case errors.Is(err, runtime.ErrIdempotencyKeyReused):
		var kr *runtime.KeyReusedError
		key := ""
		if errors.As(err, &kr) {
			key = kr.Key
		}
		return fmt.Errorf("%w: %w", keyReused(key), err)
	case errors.Is(err, journal.ErrDuplicateMismatch):
		return fmt.Errorf("%w: %w", &bank.Error{Code: codeIdempotencyKeyReused, Message: "the Idempotency-Key's first request stored other events than this request would; use a new key for a new request"}, err)
	case errors.Is(err, erasure.ErrSubjectErased):
		return fmt.Errorf("%w: %w", &bank.Error{Code: bank.CodeCustomerErased, Message: "the customer was erased, so no personal data can be stored for it again; use a new customer ID"}, err)
	case runtime.IsRetryable(err) || matchesAny(err, retryable):
		return fmt.Errorf("%w: %w", errUnavailable, err)
	case matchesAny(err, serverFaults):
		return &serverFault{err: err}
	}
	return err
}

func matchesAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// accountOf returns the account ID of an account stream, "" for another
// stream.
func accountOf(s journal.StreamID) string {
	if s.Tag.Group() != bank.TagGroupAccount {
		return ""
	}
	return s.Tag.Value()
}

// retiredMessage says which account was retired, when err names it.
func retiredMessage(err error) string {
	var stream journal.StreamID
	var re *journal.StreamRetiredError
	var ae *journal.ArchivedError
	switch {
	case errors.As(err, &re):
		stream = re.Stream
	case errors.As(err, &ae):
		stream = ae.Stream
	}
	if id := accountOf(stream); id != "" {
		return fmt.Sprintf("account %q was retired (closed for good) and takes no more requests, so no retry can succeed; its history stays at GET /accounts/%s/events", id, id)
	}
	return "the account was retired (closed for good) and takes no more requests, so no retry can succeed; its history stays readable at GET /accounts/{id}/events"
}

// archivedMessage says which account's history was archived, when err
// names it.
func archivedMessage(err error) string {
	var ae *journal.ArchivedError
	if errors.As(err, &ae) {
		if id := accountOf(ae.Stream); id != "" {
			return fmt.Sprintf("this request needs events of account %q up to version %d, which are archived, so no retry can succeed; read the account with GET /accounts/%s", id, ae.CutVersion, id)
		}
	}
	return "this request needs events of the account that were archived, so no retry can succeed; read the account with GET /accounts/{id}"
}
