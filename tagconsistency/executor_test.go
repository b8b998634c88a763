package tagconsistency_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	otelx "github.com/scribe-es/scribe/internal/telemetry"
	"github.com/scribe-es/scribe/internal/usercode"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/tagconsistency"
)

func memoryBackend() backend { return backends()[0] }

func defineCourse(t *testing.T, e env, course string, seats int) {
	t.Helper()
	_, err := e.owners.Do(context.Background(), journal.Stream(courseTag(course)), func(*lockStream) ([]journal.Event, error) {
		return []journal.Event{defineCourseEvent(course, seats)}, nil
	})
	require.NoError(t, err)
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	j := memory.New()
	owners, err := newLockOwners(context.Background(), j, "n")
	require.NoError(t, err)
	_, err = tagconsistency.New(tagconsistency.Config{Owners: owners})
	require.ErrorContains(t, err, "Journal")
	_, err = tagconsistency.New(tagconsistency.Config{Journal: j})
	require.ErrorContains(t, err, "Owners")
	_, err = tagconsistency.New(tagconsistency.Config{Journal: j, Owners: owners, EndTimeout: -time.Second})
	require.ErrorContains(t, err, "negative")
	_, err = tagconsistency.New(tagconsistency.Config{Journal: j, Owners: owners})
	require.NoError(t, err)
}

func TestInvalidCommandsAreRefusedBeforeReserving(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend())
	ok := enrol("s", "c")
	cases := map[string]func(*tagconsistency.Command[enrolState]){
		"no name":          func(c *tagconsistency.Command[enrolState]) { c.Name = "" },
		"no decide":        func(c *tagconsistency.Command[enrolState]) { c.Decide = nil },
		"no evolve":        func(c *tagconsistency.Command[enrolState]) { c.Evolve = nil },
		"no items":         func(c *tagconsistency.Command[enrolState]) { c.Query = journal.Query{} },
		"all events":       func(c *tagconsistency.Command[enrolState]) { c.Query = journal.AllEvents() },
		"item without tag": func(c *tagconsistency.Command[enrolState]) { c.Query.Items[1].Tags = nil },
		"empty extra tag":  func(c *tagconsistency.Command[enrolState]) { c.Tags = []journal.Tag{""} },
	}
	for name, spoil := range cases {
		cmd := ok
		cmd.Query.Items = slices.Clone(ok.Query.Items)
		spoil(&cmd)
		_, err := tagconsistency.Execute(context.Background(), e.x, cmd, tagconsistency.Options{})
		require.ErrorIs(t, err, tagconsistency.ErrInvalidCommand, name)
		_, err = tagconsistency.Streams(cmd)
		require.ErrorIs(t, err, tagconsistency.ErrInvalidCommand, name)
	}
	require.Zero(t, e.histogramCount(t, "scribe.dcb.reservation.wait"), "nothing was reserved")
}

// recordingOwners wraps owners and records the order of reservations.
type recordingOwners struct {
	*lockOwners
	mu       sync.Mutex
	reserved []journal.Tag
	released []journal.Tag
}

func (o *recordingOwners) Reserve(ctx context.Context, id journal.StreamID) (*tagconsistency.Reservation, error) {
	r, err := o.lockOwners.Reserve(ctx, id)
	if err == nil {
		o.mu.Lock()
		o.reserved = append(o.reserved, id.Tag)
		o.mu.Unlock()
		r.Grantor = recordingGrant{o: o, tag: id.Tag, Grantor: r.Grantor}
	}
	return r, err
}

// recordingGrant records the release of a reservation, then ends it.
type recordingGrant struct {
	tagconsistency.Grantor
	o   *recordingOwners
	tag journal.Tag
}

func (g recordingGrant) released() {
	g.o.mu.Lock()
	g.o.released = append(g.o.released, g.tag)
	g.o.mu.Unlock()
}

func (g recordingGrant) Cancel(ctx context.Context, cause error) error {
	g.released()
	return g.Grantor.Cancel(ctx, cause)
}

func (g recordingGrant) Confirm(ctx context.Context, recs []journal.Record) error {
	g.released()
	return g.Grantor.Confirm(ctx, recs)
}

func TestReservesEveryTagInSortedOrder(t *testing.T) {
	t.Parallel()
	var rec *recordingOwners
	e := setup(t, memoryBackend(), func(c *tagconsistency.Config, o *lockOwners) {
		rec = &recordingOwners{lockOwners: o}
		c.Owners = rec
	})
	ctx := context.Background()
	z, a := journal.Tag("account:z"), journal.Tag("account:a")
	require.NoError(t, e.deposit(ctx, z, 10))
	require.NoError(t, e.deposit(ctx, a, 10))
	cmd := transfer(z, a, 5)
	cmd.Tags = []journal.Tag{"audit:1", z}
	streams, err := tagconsistency.Streams(cmd)
	require.NoError(t, err)
	require.Equal(t, []journal.StreamID{journal.Stream(a), journal.Stream(z), journal.Stream("audit:1")}, streams)

	res, err := tagconsistency.Execute(ctx, e.x, cmd, tagconsistency.Options{})
	require.NoError(t, err)
	require.Len(t, res.Records, 1)
	require.Equal(t, []journal.Tag{a, z, "audit:1"}, rec.reserved)
	require.ElementsMatch(t, []journal.Tag{a, z, "audit:1"}, rec.released)
	// The owners adopted the new version of the tags the event carries.
	require.Len(t, e.owners.stream(journal.Stream(z)).records, 2)
	require.Len(t, e.owners.stream(journal.Stream(a)).records, 2)
	require.Empty(t, e.owners.stream(journal.Stream("audit:1")).records)
}

func TestDomainErrorIsReturnedUnchangedAndNothingIsWritten(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend())
	defineCourse(t, e, "c", 0)
	domain := errors.New("no")
	cmd := enrol("s", "c")
	cmd.Decide = func(enrolState) ([]journal.Event, error) { return nil, domain }
	res, err := tagconsistency.Execute(context.Background(), e.x, cmd, tagconsistency.Options{})
	require.Same(t, domain, err)
	require.Empty(t, res.Records)
	require.EqualValues(t, 1, e.counter(t, "scribe.dcb.commands", "rejected"))
	_, err = tagconsistency.Execute(context.Background(), e.x, enrol("s", "c"), tagconsistency.Options{})
	require.ErrorIs(t, err, errCourseFull, "the reservations were released")
	require.Len(t, readStream(t, e.j, courseTag("c")), 1)
}

func TestDecideWithoutEventsWritesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend())
	defineCourse(t, e, "c", 3)
	cmd := enrol("s", "c")
	var seen enrolState
	cmd.Decide = func(s enrolState) ([]journal.Event, error) { seen = s; return nil, nil }
	res, err := tagconsistency.Execute(context.Background(), e.x, cmd, tagconsistency.Options{})
	require.NoError(t, err)
	require.Empty(t, res.Records)
	require.Equal(t, enrolState{defined: true, capacity: 3}, seen)
	require.Len(t, readStream(t, e.j, courseTag("c")), 1)
}

func TestPanicsInUserCodeFailOnlyThatCommand(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend())
	defineCourse(t, e, "c", 3)
	ctx := context.Background()
	cmd := enrol("s", "c")
	cmd.Decide = func(enrolState) ([]journal.Event, error) { panic("boom") }
	_, err := tagconsistency.Execute(ctx, e.x, cmd, tagconsistency.Options{})
	var pe *usercode.PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "decide", pe.Phase)
	require.Equal(t, cmd.Name, pe.Command)
	require.ErrorIs(t, err, usercode.ErrPanic)

	cmd = enrol("s", "other")
	cmd.Evolve = func(enrolState, journal.Record) enrolState { panic("evolve boom") }
	defineCourse(t, e, "other", 3)
	_, err = tagconsistency.Execute(ctx, e.x, cmd, tagconsistency.Options{})
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "evolve", pe.Phase)

	_, err = tagconsistency.Execute(ctx, e.x, enrol("s", "c"), tagconsistency.Options{})
	require.NoError(t, err)
	_, err = tagconsistency.Execute(ctx, e.x, enrol("s", "other"), tagconsistency.Options{})
	require.NoError(t, err)
}

func TestEventWithAnUnreservedTagIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend())
	defineCourse(t, e, "c", 3)
	cmd := enrol("s", "c")
	decide := cmd.Decide
	cmd.Decide = func(s enrolState) ([]journal.Event, error) {
		evs, err := decide(s)
		evs[0].Tags = append(evs[0].Tags, "teacher:t")
		return evs, err
	}
	_, err := tagconsistency.Execute(context.Background(), e.x, cmd, tagconsistency.Options{})
	require.ErrorIs(t, err, tagconsistency.ErrInvalidCommand)
	require.ErrorContains(t, err, `"teacher:t"`)
	require.Len(t, readStream(t, e.j, courseTag("c")), 1, "nothing was written")

	cmd.Tags = []journal.Tag{"teacher:t"}
	res, err := tagconsistency.Execute(context.Background(), e.x, cmd, tagconsistency.Options{})
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.Records[0].Version("teacher:t"))
}

func TestEventInAnotherPartitionIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend())
	defineCourse(t, e, "c", 3)
	cmd := enrol("s", "c")
	decide := cmd.Decide
	cmd.Decide = func(s enrolState) ([]journal.Event, error) {
		evs, err := decide(s)
		evs[0].Metadata.Partition = "tenant-b"
		return evs, err
	}
	_, err := tagconsistency.Execute(context.Background(), e.x, cmd, tagconsistency.Options{})
	require.ErrorIs(t, err, tagconsistency.ErrInvalidCommand)
	require.ErrorContains(t, err, "tenant-b")
}

func TestPartitionedCommand(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend())
	ctx := context.Background()
	cmd := claimUsername("u1", "neo")
	cmd.Query.Partition = "tenant-a"
	res, err := tagconsistency.Execute(ctx, e.x, cmd, tagconsistency.Options{})
	require.NoError(t, err)
	require.Equal(t, "tenant-a", res.Records[0].Partition())
	// Another tenant has its own names.
	_, err = tagconsistency.Execute(ctx, e.x, claimUsername("u2", "neo"), tagconsistency.Options{})
	require.NoError(t, err)
	_, err = tagconsistency.Execute(ctx, e.x, cmd, tagconsistency.Options{})
	require.ErrorIs(t, err, errNameTaken)
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend())
	defineCourse(t, e, "c", 1)
	ctx := context.Background()
	opts := tagconsistency.Options{IdempotencyKey: "req-1", Metadata: journal.Metadata{CorrelationID: "corr", UserID: "alice"}}
	first, err := tagconsistency.Execute(ctx, e.x, enrol("s", "c"), opts)
	require.NoError(t, err)
	require.False(t, first.Duplicate)
	require.Len(t, first.Records, 1)
	m := first.Records[0].Metadata
	require.Equal(t, "req-1", m.IdempotencyKey)
	require.Equal(t, "corr", m.CorrelationID)
	require.Equal(t, "alice", m.UserID)

	// The course is now full, yet the same key returns the first result.
	again, err := tagconsistency.Execute(ctx, e.x, enrol("s", "c"), opts)
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Records[0].ID, again.Records[0].ID)
	require.Equal(t, first.Records[0].Position, again.Records[0].Position)
	require.EqualValues(t, 1, e.counter(t, "scribe.dcb.commands", "duplicate"))
	require.Len(t, readStream(t, e.j, courseTag("c")), 2)

	// Another key decides again.
	_, err = tagconsistency.Execute(ctx, e.x, enrol("s2", "c"), tagconsistency.Options{IdempotencyKey: "req-2"})
	require.ErrorIs(t, err, errCourseFull)
}

func TestReservationTimeoutNamesTheTagAndReleasesTheOthers(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend(), func(_ *tagconsistency.Config, o *lockOwners) {
		o.timeout = 50 * time.Millisecond
	})
	ctx := context.Background()
	a, b := accountTag(1), accountTag(2)
	require.NoError(t, e.deposit(ctx, a, 10))
	require.NoError(t, e.deposit(ctx, b, 10))

	held, err := e.owners.Reserve(ctx, journal.Stream(b))
	require.NoError(t, err)
	_, err = tagconsistency.Execute(ctx, e.x, transfer(a, b, 1), tagconsistency.Options{})
	require.ErrorIs(t, err, tagconsistency.ErrReservationTimeout)
	var te *tagconsistency.ReservationTimeoutError
	require.ErrorAs(t, err, &te)
	require.Equal(t, journal.Stream(b), te.Stream)
	require.GreaterOrEqual(t, te.Waited, 50*time.Millisecond)
	require.ErrorContains(t, err, "account:2")

	// account:1, reserved first, was released.
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	r, err := e.owners.Reserve(short, journal.Stream(a))
	require.NoError(t, err)
	require.NoError(t, r.Grantor.Cancel(ctx, nil))

	require.NoError(t, held.Grantor.Cancel(ctx, nil))
	_, err = tagconsistency.Execute(ctx, e.x, transfer(a, b, 1), tagconsistency.Options{})
	require.NoError(t, err)
}

func TestBusyTagQueuesTheCommand(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend())
	ctx := context.Background()
	a, b := accountTag(1), accountTag(2)
	require.NoError(t, e.deposit(ctx, a, 10))
	require.NoError(t, e.deposit(ctx, b, 10))
	held, err := e.owners.Reserve(ctx, journal.Stream(b))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := tagconsistency.Execute(ctx, e.x, transfer(a, b, 1), tagconsistency.Options{})
		done <- err
	}()
	// The command waits at account:2 (it holds account:1 meanwhile).
	require.Eventually(t, func() bool { return len(e.owners.stream(journal.Stream(a)).slot) == 1 }, 5*time.Second, time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the command did not queue behind the reservation: %v", err)
	default:
	}
	require.NoError(t, held.Grantor.Cancel(ctx, nil))
	require.NoError(t, <-done)
}

func TestContextEndedBeforeExecution(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend())
	defineCourse(t, e, "c", 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tagconsistency.Execute(ctx, e.x, enrol("s", "c"), tagconsistency.Options{})
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, readStream(t, e.j, courseTag("c")), 1)
	_, err = tagconsistency.Execute(context.Background(), e.x, enrol("s", "c"), tagconsistency.Options{})
	require.NoError(t, err)
}

func TestFoldFromOwnersRecords(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend(), func(c *tagconsistency.Config, o *lockOwners) {
		o.complete = true
		c.FoldCacheSize = -1
	})
	ctx := context.Background()
	defineCourse(t, e, "c", 2)
	for _, s := range []string{"s1", "s2"} {
		_, err := tagconsistency.Execute(ctx, e.x, enrol(s, "c"), tagconsistency.Options{})
		require.NoError(t, err)
	}
	_, err := tagconsistency.Execute(ctx, e.x, enrol("s3", "c"), tagconsistency.Options{})
	require.ErrorIs(t, err, errCourseFull)
	_, err = tagconsistency.Execute(ctx, e.x, enrol("s1", "c"), tagconsistency.Options{})
	require.ErrorIs(t, err, errAlreadyEnrolled)
	require.Equal(t, []string{"owners", "owners", "owners", "owners"}, readSources(e))
}

func TestFoldCacheSeesEventsOfOtherWriters(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend())
	ctx := context.Background()
	defineCourse(t, e, "c", 2)
	_, err := tagconsistency.Execute(ctx, e.x, enrol("s1", "c"), tagconsistency.Options{})
	require.NoError(t, err)
	// A command with another query enrols s2 into the same course.
	_, err = tagconsistency.Execute(ctx, e.x, enrol("s2", "c"), tagconsistency.Options{})
	require.NoError(t, err)
	// And an aggregate-style write on the course tag lowers nothing but is folded.
	_, err = e.owners.Do(ctx, journal.Stream(courseTag("c")), func(*lockStream) ([]journal.Event, error) {
		return []journal.Event{defineCourseEvent("c", 3)}, nil
	})
	require.NoError(t, err)
	// s1's cached fold (1 enrolled, capacity 2) must catch up: 2 enrolled, capacity 3.
	cmd := enrol("s1", "c")
	var seen enrolState
	cmd.Decide = func(s enrolState) ([]journal.Event, error) { seen = s; return nil, nil }
	_, err = tagconsistency.Execute(ctx, e.x, cmd, tagconsistency.Options{})
	require.NoError(t, err)
	require.Equal(t, enrolState{defined: true, capacity: 3, enrolled: 2, already: true}, seen)
	require.Equal(t, []string{"journal", "journal", "cache"}, readSources(e))
}

// readSources lists the scribe.dcb.source attribute of every read span.
func readSources(e env) []string {
	var out []string
	for _, s := range e.spans.Ended() {
		if s.Name() != otelx.SpanDCBRead {
			continue
		}
		for _, kv := range s.Attributes() {
			if kv.Key == "scribe.dcb.source" {
				out = append(out, kv.Value.AsString())
			}
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func TestSpansAndMetrics(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend())
	ctx := context.Background()
	a, b := accountTag(1), accountTag(2)
	require.NoError(t, e.deposit(ctx, a, 10))
	require.NoError(t, e.deposit(ctx, b, 10))
	res, err := tagconsistency.Execute(ctx, e.x, transfer(a, b, 5), tagconsistency.Options{})
	require.NoError(t, err)

	spans := e.spans.Ended()
	var root sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == otelx.SpanDCBExecute {
			root = s
		}
	}
	require.NotNil(t, root)
	v, _ := attr(root, "scribe.outcome")
	require.Equal(t, "ok", v.AsString())
	var children []string
	for _, s := range spans {
		if s.Parent().SpanID() == root.SpanContext().SpanID() {
			children = append(children, s.Name())
			if s.Name() == otelx.SpanDCBReserve {
				w, ok := attr(s, "scribe.reservation.wait_ms")
				require.True(t, ok, "reserve span has the wait time")
				require.GreaterOrEqual(t, w.AsFloat64(), 0.0)
			}
		}
	}
	require.Equal(t, []string{otelx.SpanDCBReserve, otelx.SpanDCBReserve, otelx.SpanDCBRead, otelx.SpanDCBDecide, otelx.SpanDCBAppend, otelx.SpanDCBConfirm}, children)
	// The event carries the trace context of the execution.
	require.Contains(t, res.Records[0].Metadata.TraceParent, root.SpanContext().TraceID().String())

	require.EqualValues(t, 2, e.histogramCount(t, "scribe.dcb.reservation.wait"))
	require.EqualValues(t, 1, e.counter(t, "scribe.dcb.commands", "ok"))
	require.Zero(t, e.counter(t, "scribe.dcb.conflicts", ""))
	// The journal metrics: one append of the transfer's events, and the
	// fold's reads of the two accounts' streams.
	require.EqualValues(t, 1, e.histogramCount(t, "scribe.journal.append.duration"))
	require.EqualValues(t, len(res.Records), e.counter(t, "scribe.journal.append.events", ""))
	require.EqualValues(t, 2, e.histogramCount(t, "scribe.journal.read.duration"))

	// A rejected command ends with a cancel span.
	_, err = tagconsistency.Execute(ctx, e.x, transfer(a, b, 500), tagconsistency.Options{})
	require.ErrorIs(t, err, errInsufficient)
	var cancels int
	for _, s := range e.spans.Ended() {
		if s.Name() == otelx.SpanDCBCancel {
			cancels++
		}
	}
	require.Equal(t, 1, cancels)
	require.EqualValues(t, 1, e.counter(t, "scribe.dcb.commands", "rejected"))
	// A domain rejection is not an error of the system: the execute and
	// decide spans keep status Unset and carry the rejection as an event.
	var marked []string
	for _, s := range e.spans.Ended() {
		if s.Name() != otelx.SpanDCBExecute && s.Name() != otelx.SpanDCBDecide {
			continue
		}
		if v, ok := attr(s, "scribe.rejected"); !ok || !v.AsBool() {
			continue
		}
		require.Equal(t, codes.Unset, s.Status().Code, "%s of a rejected command", s.Name())
		require.Len(t, s.Events(), 1, s.Name())
		require.Equal(t, "scribe.rejection", s.Events()[0].Name)
		marked = append(marked, s.Name())
	}
	require.ElementsMatch(t, []string{otelx.SpanDCBExecute, otelx.SpanDCBDecide}, marked)
}

// transferFromStates is transfer deciding from the owners' balances.
func transferFromStates(from, to journal.Tag, amount int64, use *bool) tagconsistency.Command[transferState] {
	cmd := transfer(from, to, amount)
	cmd.FromStates = func(held map[journal.Tag]tagconsistency.Held) (transferState, bool) {
		if !*use {
			return transferState{}, false
		}
		s := transferState{bal: map[journal.Tag]int64{}, opened: map[journal.Tag]bool{}}
		for tag, h := range held {
			s.bal[tag], s.opened[tag] = h.State.(int64), h.Version > 0
		}
		return s, true
	}
	return cmd
}

func TestFromStates(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend(), func(_ *tagconsistency.Config, o *lockOwners) { o.balances = true })
	ctx := context.Background()
	a, b := accountTag(1), accountTag(2)
	require.NoError(t, e.deposit(ctx, a, 100))
	require.NoError(t, e.deposit(ctx, b, 100))
	use := true
	_, err := tagconsistency.Execute(ctx, e.x, transferFromStates(a, b, 60, &use), tagconsistency.Options{})
	require.NoError(t, err)
	_, err = tagconsistency.Execute(ctx, e.x, transferFromStates(a, b, 60, &use), tagconsistency.Options{})
	require.ErrorIs(t, err, errInsufficient)
	use = false // falls back to folding the events
	_, err = tagconsistency.Execute(ctx, e.x, transferFromStates(b, a, 160, &use), tagconsistency.Options{})
	require.NoError(t, err)
	require.Equal(t, []string{"states", "states", "journal"}, readSources(e))

	// A write behind the owners' back is still a conflict.
	bypass := depositEvent(a, 1)
	bypass.ID = journal.NewEventID()
	_, err = e.j.Append(ctx, []journal.Event{bypass}, journal.AppendOptions{})
	require.NoError(t, err)
	use = true
	_, err = tagconsistency.Execute(ctx, e.x, transferFromStates(a, b, 1, &use), tagconsistency.Options{})
	require.ErrorIs(t, err, tagconsistency.ErrConflict)
	// The owners reloaded: a's true balance is 100-60+160+1 = 201.
	_, err = tagconsistency.Execute(ctx, e.x, transferFromStates(a, b, 201, &use), tagconsistency.Options{})
	require.NoError(t, err)
	require.Zero(t, balanceOf(a, readStream(t, e.j, a)))
}

// tailHits sums the scribe.dcb.tail_hits attribute of the read spans.
func tailHits(e env) int64 {
	var n int64
	for _, s := range e.spans.Ended() {
		if v, ok := attr(s, "scribe.dcb.tail_hits"); ok && s.Name() == otelx.SpanDCBRead {
			n += v.AsInt64()
		}
	}
	return n
}

func TestTailCacheServesReadsAndMissesForeignWrites(t *testing.T) {
	t.Parallel()
	e := setup(t, memoryBackend())
	ctx := context.Background()
	a, b, c := accountTag(1), accountTag(2), accountTag(3)
	for _, acc := range []journal.Tag{a, b, c} {
		require.NoError(t, e.deposit(ctx, acc, 100))
	}
	// a→b and b→c fold from the journal (first time for these queries).
	_, err := tagconsistency.Execute(ctx, e.x, transfer(a, b, 10), tagconsistency.Options{})
	require.NoError(t, err)
	_, err = tagconsistency.Execute(ctx, e.x, transfer(b, c, 10), tagconsistency.Options{})
	require.NoError(t, err)
	// a→b again: its cached fold misses the b→c transfer on b, which the tail
	// cache holds (this executor appended it).
	before := tailHits(e)
	probe := transfer(a, b, 0)
	var seen transferState
	probe.Decide = func(s transferState) ([]journal.Event, error) { seen = s; return nil, nil }
	_, err = tagconsistency.Execute(ctx, e.x, probe, tagconsistency.Options{})
	require.NoError(t, err)
	require.Greater(t, tailHits(e), before)
	require.EqualValues(t, 90, seen.bal[a])
	require.EqualValues(t, 100, seen.bal[b])

	// A write through the owner alone is not in the tail: the journal is read.
	require.NoError(t, e.deposit(ctx, b, 7))
	before = tailHits(e)
	_, err = tagconsistency.Execute(ctx, e.x, probe, tagconsistency.Options{})
	require.NoError(t, err)
	require.EqualValues(t, 107, seen.bal[b])
	require.EqualValues(t, 90, seen.bal[a])
	require.Equal(t, before, tailHits(e), "b moved outside the executor: read from the journal")
}

// countingReads counts ReadEvent calls (the idempotency lookup).
type countingReads struct {
	*memory.Journal
	readEvents atomic.Int64
}

func (c *countingReads) ReadEvent(ctx context.Context, id uuid.UUID) (journal.Record, error) {
	c.readEvents.Add(1)
	return c.Journal.ReadEvent(ctx, id)
}

func TestIdempotencyKeyLooksUpOnlyWhenTheAnswerCouldDiffer(t *testing.T) {
	t.Parallel()
	j := &countingReads{Journal: memory.New()}
	t.Cleanup(func() { _ = j.Close() })
	e := setup(t, backend{name: "counting", open: func(*testing.T) store { return j }})
	ctx := context.Background()
	a, b := accountTag(1), accountTag(2)
	require.NoError(t, e.deposit(ctx, a, 10))
	require.NoError(t, e.deposit(ctx, b, 10))

	// A new key: no lookup.
	first, err := tagconsistency.Execute(ctx, e.x, transfer(a, b, 3), tagconsistency.Options{IdempotencyKey: "t-1"})
	require.NoError(t, err)
	require.False(t, first.Duplicate)
	require.Zero(t, j.readEvents.Load(), "a command with a new idempotency key reads nothing by ID")

	// The same key with a command that now decides other events: the
	// append finds the key's events, and the first result answers.
	again, err := tagconsistency.Execute(ctx, e.x, transfer(a, b, 4), tagconsistency.Options{IdempotencyKey: "t-1"})
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Records[0].ID, again.Records[0].ID)
	require.Equal(t, first.Records[0].Data, again.Records[0].Data)
	require.Positive(t, j.readEvents.Load())

	// The same key with a command that would now be rejected: the first
	// result answers too.
	again, err = tagconsistency.Execute(ctx, e.x, transfer(a, b, 1000), tagconsistency.Options{IdempotencyKey: "t-1"})
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Records[0].Position, again.Records[0].Position)

	// Nothing was written twice.
	require.Len(t, readStream(t, j, a), 2)
	require.Len(t, readStream(t, j, b), 2)
}
