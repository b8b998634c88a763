package scribetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// timeout bounds each step of a fixture (seeding, the command, a read).
const timeout = 30 * time.Second

// AggregateFixture is a given/when/then fixture for one typed aggregate.
type AggregateFixture[S, C any] struct {
	t    testing.TB
	rt   *runtime.Runtime
	cmds *runtime.Commands[S, C]
}

// Aggregate returns a fixture for the aggregate cmds (registered with
// runtime.RegisterAggregateOf) on rt, the runtime it was registered with.
func Aggregate[S, C any](t testing.TB, rt *runtime.Runtime, cmds *runtime.Commands[S, C]) *AggregateFixture[S, C] {
	return &AggregateFixture[S, C]{t: t, rt: rt, cmds: cmds}
}

// Given appends events (registered event values, possibly none) to the
// aggregate's stream id through its actor (runtime.Seed): Evolve folds them
// as it would have after the commands that made them. A stream that already
// holds events gets them appended after its own. It fails the test at once
// when they cannot be appended.
func (f *AggregateFixture[S, C]) Given(id string, events ...any) *AggregateWhen[S, C] {
	f.t.Helper()
	w := &AggregateWhen[S, C]{f: f, id: id}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if len(events) > 0 {
		res, err := runtime.Seed(ctx, f.rt, f.cmds.Target(id), events...)
		if err != nil {
			f.t.Fatalf("scribetest: Given(%q): appending %d events: %v", id, len(events), err)
		}
		w.version = res.Version
	} else {
		st, err := f.cmds.State(ctx, id)
		if err != nil {
			f.t.Fatalf("scribetest: Given(%q): reading the stream: %v", id, err)
		}
		w.version = st.Version
	}
	return w
}

// AggregateWhen is a fixture after Given: it runs one command.
type AggregateWhen[S, C any] struct {
	f       *AggregateFixture[S, C]
	id      string
	version uint64 // the stream's version after Given
}

// When executes command on the stream (with opts, e.g. an idempotency key).
func (w *AggregateWhen[S, C]) When(command C, opts ...runtime.ExecuteOption) *AggregateThen[S, C] {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := w.f.cmds.Execute(ctx, w.id, command, opts...)
	return &AggregateThen[S, C]{w: w, command: command, res: res, err: err}
}

// AggregateThen holds a command's outcome for the checks.
type AggregateThen[S, C any] struct {
	w       *AggregateWhen[S, C]
	command C
	res     runtime.Result[S]
	err     error
}

// Result is the command's result and error, for checks of one's own.
func (th *AggregateThen[S, C]) Result() (runtime.Result[S], error) { return th.res, th.err }

// ThenEvents checks that the command succeeded and appended exactly events,
// in order (compared with reflect.DeepEqual after decoding what was
// stored); no events means it decided none.
func (th *AggregateThen[S, C]) ThenEvents(events ...any) *AggregateThen[S, C] {
	t := th.w.f.t
	t.Helper()
	if th.err != nil {
		t.Errorf("scribetest: %T on %q: want events %s, got error: %v", th.command, th.w.id, describe(events), th.err)
		return th
	}
	got, err := decodeAll(th.w.f.rt, th.res.Records)
	if err != nil {
		t.Errorf("scribetest: %T on %q: decoding the appended events: %v", th.command, th.w.id, err)
		return th
	}
	if !sameEvents(got, events) {
		t.Errorf("scribetest: %T on %q appended other events\n want: %s\n  got: %s", th.command, th.w.id, describe(events), describe(got))
	}
	return th
}

// ThenError checks that the command failed with an error matching target
// (errors.Is) and that the stream is still at its version after Given:
// nothing was appended.
func (th *AggregateThen[S, C]) ThenError(target error) *AggregateThen[S, C] {
	t := th.w.f.t
	t.Helper()
	if th.err == nil {
		got, _ := decodeAll(th.w.f.rt, th.res.Records)
		t.Errorf("scribetest: %T on %q: want error %v, got success with events %s", th.command, th.w.id, target, describe(got))
		return th
	}
	if !errors.Is(th.err, target) {
		t.Errorf("scribetest: %T on %q: want an error matching %v, got: %v", th.command, th.w.id, target, th.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	st, err := th.w.f.cmds.State(ctx, th.w.id)
	switch {
	case err != nil:
		t.Errorf("scribetest: %T on %q: reading the stream after the rejection: %v", th.command, th.w.id, err)
	case st.Version != th.w.version:
		t.Errorf("scribetest: %T on %q was rejected but the stream moved from version %d to %d", th.command, th.w.id, th.w.version, st.Version)
	}
	return th
}

// ThenState checks that the stream's state after the command equals want
// (reflect.DeepEqual), both as the actor returned it and as State folds it
// from the store.
func (th *AggregateThen[S, C]) ThenState(want S) *AggregateThen[S, C] {
	t := th.w.f.t
	t.Helper()
	if th.err != nil {
		t.Errorf("scribetest: %T on %q: want state %+v, got error: %v", th.command, th.w.id, want, th.err)
		return th
	}
	if !reflect.DeepEqual(th.res.State, want) {
		t.Errorf("scribetest: %T on %q: state after the command\n want: %+v\n  got: %+v", th.command, th.w.id, want, th.res.State)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	st, err := th.w.f.cmds.State(ctx, th.w.id, runtime.AtLeastVersion(th.res.Version))
	switch {
	case err != nil:
		t.Errorf("scribetest: %T on %q: folding the stream: %v", th.command, th.w.id, err)
	case !reflect.DeepEqual(st.State, want):
		t.Errorf("scribetest: %T on %q: state folded from the store differs from the actor's\n want: %+v\n  got: %+v", th.command, th.w.id, want, st.State)
	}
	return th
}

// DCBFixture is a given/when/then fixture for one DCB command.
type DCBFixture[C, S any] struct {
	t   testing.TB
	rt  *runtime.Runtime
	cmd *runtime.DCBCommand[C, S]
}

// DCB returns a fixture for the DCB command cmd registered on rt.
func DCB[C, S any](t testing.TB, rt *runtime.Runtime, cmd *runtime.DCBCommand[C, S]) *DCBFixture[C, S] {
	return &DCBFixture[C, S]{t: t, rt: rt, cmd: cmd}
}

// Given appends events to the stream of target (an aggregate's) through its
// actor, as AggregateFixture.Given does; call it once per stream the
// command reads. It fails the test at once when they cannot be appended.
func (f *DCBFixture[C, S]) Given(target runtime.Target, events ...any) *DCBFixture[C, S] {
	f.t.Helper()
	if len(events) == 0 {
		return f
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := runtime.Seed(ctx, f.rt, target, events...); err != nil {
		f.t.Fatalf("scribetest: Given(%s): appending %d events: %v", target.Stream(), len(events), err)
	}
	return f
}

// When executes command (with opts).
func (f *DCBFixture[C, S]) When(command C, opts ...runtime.ExecuteOption) *DCBThen[C, S] {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := f.cmd.Execute(ctx, command, opts...)
	return &DCBThen[C, S]{f: f, command: command, res: res, err: err}
}

// DCBThen holds a DCB command's outcome for the checks.
type DCBThen[C, S any] struct {
	f       *DCBFixture[C, S]
	command C
	res     runtime.DCBResult
	err     error
}

// Result is the command's result and error, for checks of one's own.
func (th *DCBThen[C, S]) Result() (runtime.DCBResult, error) { return th.res, th.err }

// ThenEvents checks that the command succeeded and appended exactly events,
// in order (compared with reflect.DeepEqual after decoding what was stored).
func (th *DCBThen[C, S]) ThenEvents(events ...any) *DCBThen[C, S] {
	t := th.f.t
	t.Helper()
	if th.err != nil {
		t.Errorf("scribetest: %T: want events %s, got error: %v", th.command, describe(events), th.err)
		return th
	}
	got, err := decodeAll(th.f.rt, th.res.Records)
	if err != nil {
		t.Errorf("scribetest: %T: decoding the appended events: %v", th.command, err)
		return th
	}
	if !sameEvents(got, events) {
		t.Errorf("scribetest: %T appended other events\n want: %s\n  got: %s", th.command, describe(events), describe(got))
	}
	return th
}

// ThenError checks that the command failed with an error matching target
// (errors.Is) and appended nothing.
func (th *DCBThen[C, S]) ThenError(target error) *DCBThen[C, S] {
	t := th.f.t
	t.Helper()
	switch {
	case th.err == nil:
		got, _ := decodeAll(th.f.rt, th.res.Records)
		t.Errorf("scribetest: %T: want error %v, got success with events %s", th.command, target, describe(got))
	case !errors.Is(th.err, target):
		t.Errorf("scribetest: %T: want an error matching %v, got: %v", th.command, target, th.err)
	case len(th.res.Records) > 0:
		t.Errorf("scribetest: %T failed (%v) but reports %d appended events", th.command, th.err, len(th.res.Records))
	}
	return th
}

func decodeAll(rt *runtime.Runtime, recs []journal.Record) ([]any, error) {
	out := make([]any, 0, len(recs))
	for _, r := range recs {
		v, err := rt.Decode(r)
		if err != nil {
			return nil, fmt.Errorf("event %d (%s): %w", r.Position, r.Type, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func sameEvents(got, want []any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			return false
		}
	}
	return true
}

func describe(events []any) string {
	if len(events) == 0 {
		return "(none)"
	}
	parts := make([]string, len(events))
	for i, e := range events {
		parts[i] = fmt.Sprintf("%T%+v", e, e)
	}
	return strings.Join(parts, ", ")
}
