package main

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/partitioned"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/tagconsistency"
)

// sentinelPackages are the packages whose errors reach the bank's answers,
// as directories from the module root: the bank calls journal, runtime,
// erasure, the partition router and the projection runner, and the runtime
// passes on errors of actors and tagconsistency.
var sentinelPackages = []string{"journal", "runtime", "erasure", "journal/partitioned", "projection", "actors", "tagconsistency"}

// sentinelTruth is every exported sentinel of sentinelPackages, keyed
// "<dir>.<name>", with whether its documentation says a retry can overcome
// it. A sentinel added to one of those packages and missing here fails
// TestEverySentinelIsClassified: add it here, as its doc comment says, and
// make classify answer it.
var sentinelTruth = map[string]struct {
	err   error
	retry bool
}{
	"journal.ErrVersionMismatch":       {journal.ErrVersionMismatch, true},
	"journal.ErrAppendConditionFailed": {journal.ErrAppendConditionFailed, true},
	"journal.ErrSessionExpired":        {journal.ErrSessionExpired, true},
	"journal.ErrInvalidSession":        {journal.ErrInvalidSession, true},
	"journal.ErrStoreNotOpen":          {journal.ErrStoreNotOpen, true},
	"journal.ErrOpenTimeout":           {journal.ErrOpenTimeout, true},
	"journal.ErrInvalidEvent":          {journal.ErrInvalidEvent, false},
	"journal.ErrDuplicateMismatch":     {journal.ErrDuplicateMismatch, false},
	"journal.ErrInvalidQuery":          {journal.ErrInvalidQuery, false},
	"journal.ErrNotFound":              {journal.ErrNotFound, false},
	"journal.ErrOutcomeUnknown":        {journal.ErrOutcomeUnknown, true},
	"journal.ErrUnavailable":           {journal.ErrUnavailable, true},
	"journal.ErrNodeSuperseded":        {journal.ErrNodeSuperseded, true},
	"journal.ErrConfiguration":         {journal.ErrConfiguration, false},
	"journal.ErrTypeConflict":          {journal.ErrTypeConflict, false},
	"journal.ErrLeaseRevoked":          {journal.ErrLeaseRevoked, true},
	"journal.ErrArchived":              {journal.ErrArchived, false},
	"journal.ErrStreamRetired":         {journal.ErrStreamRetired, false},
	"journal.ErrSnapshotRequired":      {journal.ErrSnapshotRequired, false},
	"journal.ErrPartitionMoving":       {journal.ErrPartitionMoving, true},
	"journal.ErrPartitionMoved":        {journal.ErrPartitionMoved, false},

	"runtime.ErrConfiguration":        {runtime.ErrConfiguration, false},
	"runtime.ErrRegistration":         {runtime.ErrRegistration, false},
	"runtime.ErrNotOneEvent":          {runtime.ErrNotOneEvent, false},
	"runtime.ErrUnknownAggregate":     {runtime.ErrUnknownAggregate, false},
	"runtime.ErrUnknownEvent":         {runtime.ErrUnknownEvent, false},
	"runtime.ErrForeignTags":          {runtime.ErrForeignTags, false},
	"runtime.ErrPanic":                {runtime.ErrPanic, false},
	"runtime.ErrIdempotencyKeyReused": {runtime.ErrIdempotencyKeyReused, false},
	"runtime.ErrOverloaded":           {runtime.ErrOverloaded, true},
	"runtime.ErrLeaseLost":            {runtime.ErrLeaseLost, true},
	"runtime.ErrShutdown":             {runtime.ErrShutdown, true},
	"runtime.ErrConflict":             {runtime.ErrConflict, true},
	"runtime.ErrReservationTimeout":   {runtime.ErrReservationTimeout, true},
	"runtime.ErrInvalidCommand":       {runtime.ErrInvalidCommand, false},
	"runtime.ErrNodeUnavailable":      {runtime.ErrNodeUnavailable, true},
	"runtime.ErrNodeFenced":           {runtime.ErrNodeFenced, true},
	"runtime.ErrUnknownCommand":       {runtime.ErrUnknownCommand, false},
	"runtime.ErrNoKeyStore":           {runtime.ErrNoKeyStore, false},

	"erasure.ErrSubjectErased":       {erasure.ErrSubjectErased, false},
	"erasure.ErrInvalidArgument":     {erasure.ErrInvalidArgument, false},
	"erasure.ErrKeyMissing":          {erasure.ErrKeyMissing, true}, // once the operator restores the right key store
	"erasure.ErrKeyStoreUnavailable": {erasure.ErrKeyStoreUnavailable, true},
	"erasure.ErrCorrupt":             {erasure.ErrCorrupt, false},
	"erasure.ErrNotErasing":          {erasure.ErrNotErasing, false},

	"journal/partitioned.ErrCrossPartition":   {partitioned.ErrCrossPartition, false},
	"journal/partitioned.ErrPerDatabase":      {partitioned.ErrPerDatabase, false},
	"journal/partitioned.ErrUnknownPartition": {partitioned.ErrUnknownPartition, false},
	"journal/partitioned.ErrUnknownMember":    {partitioned.ErrUnknownMember, false},

	"projection.ErrFenced":         {projection.ErrFenced, true},
	"projection.ErrSuperseded":     {projection.ErrSuperseded, true},
	"projection.ErrPaused":         {projection.ErrPaused, true},
	"projection.ErrNoDeadLetter":   {projection.ErrNoDeadLetter, false},
	"projection.ErrNoRowsTx":       {projection.ErrNoRowsTx, false},
	"projection.ErrSlicingChanged": {projection.ErrSlicingChanged, false},

	"actors.ErrShutdown":    {actors.ErrShutdown, true},
	"actors.ErrNoAggregate": {actors.ErrNoAggregate, false},
	"actors.ErrLeaseLost":   {actors.ErrLeaseLost, true},
	"actors.ErrOverloaded":  {actors.ErrOverloaded, true},
	"actors.ErrForeignTags": {actors.ErrForeignTags, false},

	"tagconsistency.ErrConflict":           {tagconsistency.ErrConflict, true},
	"tagconsistency.ErrReservationTimeout": {tagconsistency.ErrReservationTimeout, true},
	"tagconsistency.ErrReservationLost":    {tagconsistency.ErrReservationLost, true},
	"tagconsistency.ErrInvalidCommand":     {tagconsistency.ErrInvalidCommand, false},
}

// exportedSentinels parses the non-test Go files of the package in dir and
// returns the names of its exported package-level variables named Err….
func exportedSentinels(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	fset := token.NewFileSet()
	var names []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, name := range spec.(*ast.ValueSpec).Names {
					if name.IsExported() && strings.HasPrefix(name.Name, "Err") {
						names = append(names, name.Name)
					}
				}
			}
		}
	}
	return names
}

// retryAdvice finds words that tell a client to send the request again.
var retryAdvice = regexp.MustCompile(`(?i)\bretry (it|with|after|later|once)\b|\bthen retry\b|may or may not have taken effect|try again later`)

// TestEverySentinelIsClassified walks every exported Err… variable of the
// packages the bank surfaces errors from, found by parsing their source, as
// the bank's HTTP layer answers it (classify, then failure): a retryable
// error must be a 503 with Retry-After that says to retry; any other must
// not be a 503, must not be the catch-all 500 internal, and its message
// must not advise a retry. A sentinel missing from sentinelTruth fails.
func TestEverySentinelIsClassified(t *testing.T) {
	t.Parallel()
	a := &api{log: slog.New(slog.DiscardHandler), shed: newRateLimitedLog(slog.New(slog.DiscardHandler), time.Second, time.Now)}
	var found []string
	for _, dir := range sentinelPackages {
		names := exportedSentinels(t, filepath.Join("..", "..", filepath.FromSlash(dir)))
		require.NotEmpty(t, names, "package %s declares no Err… variables: is the path right?", dir)
		for _, n := range names {
			found = append(found, dir+"."+n)
		}
	}
	for _, name := range found {
		if _, ok := sentinelTruth[name]; !ok {
			t.Errorf("%s is not in sentinelTruth: add it with whether a retry overcomes it (its doc comment says), and make classify (examples/bank/classify.go) answer it", name)
		}
	}
	for name := range sentinelTruth {
		require.True(t, slices.Contains(found, name), "sentinelTruth lists %s, which its package no longer declares: remove it", name)
	}
	for name, truth := range sentinelTruth {
		requireAdvice(t, a, name, fmt.Errorf("bank test: %w", truth.err), truth.retry)
	}
}

// TestTypedErrorsAreClassified: the typed errors that carry the sentinels
// of retention, partition moves and idempotency get the same advice, with
// the account named where the error names its stream.
func TestTypedErrorsAreClassified(t *testing.T) {
	t.Parallel()
	a := &api{log: slog.New(slog.DiscardHandler), shed: newRateLimitedLog(slog.New(slog.DiscardHandler), time.Second, time.Now)}
	alice := journal.Stream("account:alice")
	for name, tc := range map[string]struct {
		err   error
		retry bool
		code  string
	}{
		"retired":           {&journal.StreamRetiredError{Stream: alice, Version: 7}, false, "account_retired"},
		"archived, retired": {&journal.ArchivedError{Stream: alice, CutVersion: 7, FromVersion: 1, Retired: true}, false, "account_retired"},
		"archived":          {&journal.ArchivedError{Stream: alice, CutVersion: 7, FromVersion: 1}, false, "history_archived"},
		"key reused":        {&runtime.KeyReusedError{Stream: alice, Key: "k-1"}, false, "idempotency_key_reused"},
		"partition moving":  {&journal.PartitionMoveError{Partition: "eu", To: "db2"}, true, "unavailable"},
		"partition moved":   {&journal.PartitionMoveError{Partition: "eu", To: "db2", Moved: true}, false, "server_fault"},
		"panic":             {&runtime.PanicError{Value: "boom"}, false, "server_fault"},
	} {
		body := requireAdvice(t, a, name, fmt.Errorf("actors: %w", tc.err), tc.retry)
		require.Equal(t, tc.code, string(body.Code), name)
		if tc.code == "account_retired" || tc.code == "history_archived" {
			require.Contains(t, body.Error, `account "alice"`, name)
		}
	}
}

// requireAdvice checks the answer to err: retry says whether it must advise
// a retry. It returns the error body.
func requireAdvice(t *testing.T, a *api, name string, err error, retry bool) errorBody {
	t.Helper()
	r := a.failure(context.Background(), "test", err)
	var body errorBody
	require.NoError(t, json.Unmarshal(r.body, &body), name)
	require.NotEmpty(t, body.Error, name)
	if retry {
		require.Equal(t, 503, r.status, "%s is retryable: want 503, got %d %s", name, r.status, r.body)
		require.Positive(t, r.retryAfter, "%s: a 503 says when to retry", name)
		require.Regexp(t, `(?i)retry`, body.Error, "%s: a 503 says to retry", name)
		return body
	}
	require.NotEqual(t, 503, r.status, "%s is not retryable, but answers 503 %s", name, r.body)
	require.NotEqual(t, codeInternal, body.Code, "%s falls through classify to 500 internal, whose message says to retry: classify it", name)
	require.False(t, retryAdvice.MatchString(body.Error), "%s is not retryable, but its answer %d %s advises a retry", name, r.status, r.body)
	return body
}
