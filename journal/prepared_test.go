package journal_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
)

func TestPreparedAppendStoresThePreparedCopies(t *testing.T) {
	t.Parallel()
	mem := memory.New()
	a, b := validEvent(), validEvent()
	a.Data = json.RawMessage(`{ "owner" : "ada" }`)
	pa, err := journal.Prepare([]journal.Event{a}, mem.Limits())
	require.NoError(t, err)
	pb, err := journal.Prepare([]journal.Event{b}, mem.Limits())
	require.NoError(t, err)
	p, err := journal.JoinPrepared(pa, pb)
	require.NoError(t, err)
	require.Equal(t, 2, p.Len())
	res, err := mem.Append(t.Context(), []journal.Event{a, b}, journal.AppendOptions{Prepared: p, Expect: map[journal.Tag]uint64{"account:42": 0}})
	require.NoError(t, err)
	require.Len(t, res.Records, 2)
	require.JSONEq(t, `{"owner":"ada"}`, string(res.Records[0].Data))
	require.Equal(t, `{"owner":"ada"}`, string(res.Records[0].Data), "stored compacted, as validated")
	require.Equal(t, journal.DefaultPartition, res.Records[1].Metadata.Partition)
}

func TestPreparedIsIgnoredUnlessItMatchesTheEvents(t *testing.T) {
	t.Parallel()
	mem := memory.New()
	good := validEvent()
	p, err := journal.Prepare([]journal.Event{good}, mem.Limits())
	require.NoError(t, err)

	// Other events than the prepared ones are validated as usual.
	bad := validEvent()
	bad.Data = json.RawMessage(`not json`)
	_, err = mem.Append(t.Context(), []journal.Event{bad}, journal.AppendOptions{Prepared: p})
	requireInvalid(t, err, 0, "Data", "not valid JSON")
	_, err = mem.Append(t.Context(), []journal.Event{good, bad}, journal.AppendOptions{Prepared: p})
	requireInvalid(t, err, 1, "Data", "not valid JSON")

	// The options are still checked.
	_, err = mem.Append(t.Context(), []journal.Event{good}, journal.AppendOptions{Prepared: p, Expect: map[journal.Tag]uint64{"": 0}})
	requireInvalid(t, err, -1, "Expect", "empty tag")

	// Prepared under looser limits than the journal's: validated again.
	strict := memory.NewWithConfig(memory.Config{MaxDataSize: 8})
	loose, err := journal.Prepare([]journal.Event{good}, journal.Limits{})
	require.NoError(t, err)
	_, err = strict.Append(t.Context(), []journal.Event{good}, journal.AppendOptions{Prepared: loose})
	requireInvalid(t, err, 0, "Data", "over the limit")
}

func TestJoinPreparedRejectsWhatOneAppendCannotHold(t *testing.T) {
	t.Parallel()
	limits := journal.Limits{}
	e := validEvent()
	p1, err := journal.Prepare([]journal.Event{e}, limits)
	require.NoError(t, err)
	_, err = journal.JoinPrepared(p1, p1)
	requireInvalid(t, err, 1, "ID", "also the ID of event 0")

	other := validEvent()
	other.Metadata.Partition = "tenant-b"
	p2, err := journal.Prepare([]journal.Event{other}, limits)
	require.NoError(t, err)
	_, err = journal.JoinPrepared(p1, p2)
	requireInvalid(t, err, 1, "Metadata.Partition", "differs")

	p3, err := journal.Prepare([]journal.Event{validEvent()}, journal.Limits{MaxDataSize: 100})
	require.NoError(t, err)
	_, err = journal.JoinPrepared(p1, p3)
	requireInvalid(t, err, 1, "events", "different limits")

	_, err = journal.JoinPrepared()
	requireInvalid(t, err, -1, "events", "empty")
}

func TestPrepareAppendRejectsARepeatedEventID(t *testing.T) {
	t.Parallel()
	// Short lists are compared pairwise, long ones through a map: both.
	for _, n := range []int{2, 5, 9, 40} {
		evs := make([]journal.Event, n)
		for i := range evs {
			evs[i] = validEvent()
		}
		evs[n-1].ID = evs[n/2-1].ID
		_, _, err := journal.PrepareAppend(evs, journal.AppendOptions{}, journal.Limits{})
		requireInvalid(t, err, n-1, "ID", fmt.Sprintf("also the ID of event %d", n/2-1))
	}
}
