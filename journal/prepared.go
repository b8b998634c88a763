package journal

import (
	"fmt"

	"github.com/google/uuid"
)

// Prepared is a list of events validated and normalized by Prepare, so that a
// writer that validates each command on its own before commands share one
// append (the stream actor) does not pay for the same validation again inside
// the journal (AppendOptions.Prepared). A Prepared can only be made by
// Prepare and JoinPrepared: its events are private copies nobody else can
// change, so a journal may store them as they are. The zero Prepared holds no
// events.
type Prepared struct {
	events    []Event
	partition string
	limits    Limits
}

// Prepare validates and normalizes events under limits, exactly as
// PrepareAppend does with no options (an append's options are checked when it
// runs). It fails as PrepareAppend fails.
func Prepare(events []Event, limits Limits) (Prepared, error) {
	out, partition, err := PrepareAppend(events, AppendOptions{}, limits)
	if err != nil {
		return Prepared{}, err
	}
	return Prepared{events: out, partition: partition, limits: limits}, nil
}

// Len returns how many events p holds.
func (p Prepared) Len() int { return len(p.events) }

// Partition returns the partition of p's events ("" for the zero Prepared).
func (p Prepared) Partition() string { return p.partition }

// JoinPrepared concatenates parts into one append, as PrepareAppend would
// have prepared the concatenation of their events: every part must share one
// partition and limits, and no event ID may appear twice across the parts. It
// fails with an *InvalidEventError naming the first such problem (its Index
// is the event's index in the concatenation).
func JoinPrepared(parts ...Prepared) (Prepared, error) {
	switch len(parts) {
	case 0:
		return Prepared{}, &InvalidEventError{Index: -1, Field: "events", Reason: "the event list is empty; append at least one event"}
	case 1:
		return parts[0], nil
	}
	n := 0
	for _, p := range parts {
		n += len(p.events)
	}
	out := Prepared{events: make([]Event, 0, n), partition: parts[0].partition, limits: parts[0].limits}
	seen := make(map[uuid.UUID]int, n)
	for _, p := range parts {
		if p.limits != out.limits {
			return Prepared{}, &InvalidEventError{Index: len(out.events), Field: "events", Reason: "the parts were prepared under different limits; prepare every part with the journal's limits"}
		}
		for i := range p.events {
			ev := &p.events[i]
			if ev.Metadata.Partition != out.partition {
				return Prepared{}, &InvalidEventError{Index: len(out.events), Field: "Metadata.Partition", Reason: fmt.Sprintf("partition %q differs from partition %q of event 0; all events of one append must share a partition, so append them separately", ev.Metadata.Partition, out.partition)}
			}
			if j, dup := seen[ev.ID]; dup {
				return Prepared{}, &InvalidEventError{Index: len(out.events), Field: "ID", Reason: fmt.Sprintf("event ID %s is also the ID of event %d of this append; give every event its own ID (NewEventID)", ev.ID, j)}
			}
			seen[ev.ID] = len(out.events)
			out.events = append(out.events, *ev)
		}
	}
	return out, nil
}

// reuse returns p's events and partition for an append of events, or ok
// false when p is not Prepare's result for them (see AppendOptions.Prepared)
// or was prepared under limits looser than limits.
func (p Prepared) reuse(events []Event, limits Limits) ([]Event, string, bool) {
	if len(p.events) == 0 || len(p.events) != len(events) || p.limits.maxDataSize() > limits.maxDataSize() {
		return nil, "", false
	}
	for i := range events {
		if events[i].ID != p.events[i].ID {
			return nil, "", false
		}
	}
	return p.events, p.partition, true
}
