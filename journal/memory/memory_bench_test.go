package memory_test

import (
	"encoding/json"
	"fmt"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"sync/atomic"
	"testing"
)

func benchEvent(tags ...journal.Tag) journal.Event {
	return journal.Event{ID: journal.NewEventID(), Type: "Deposited", Tags: tags, Data: json.RawMessage(`{"amount":10,"currency":"EUR"}`)}
}

// BenchmarkMemoryAppend appends one event per call to one stream with an
// expected version: the actor path.
func BenchmarkMemoryAppend(b *testing.B) {
	ctx := b.Context()
	m := memory.New()
	defer m.Close()
	var v uint64
	for b.Loop() {
		if _, err := m.Append(ctx, []journal.Event{benchEvent("account:1")}, journal.AppendOptions{Expect: map[journal.Tag]uint64{"account:1": v}}); err != nil {
			b.Fatal(err)
		}
		v++
	}
}

// BenchmarkMemoryAppendParallel appends from many goroutines, each to its own stream.
func BenchmarkMemoryAppendParallel(b *testing.B) {
	ctx := b.Context()
	m := memory.New()
	defer m.Close()
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		tag := journal.NewTag("account", fmt.Sprint(next.Add(1)))
		for pb.Next() {
			if _, err := m.Append(ctx, []journal.Event{benchEvent(tag)}, journal.AppendOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkMemoryConditionalAppend runs the DCB/OCC path against a journal of
// 10,000 events in 1,000 streams: read one stream's boundary, append with a
// condition; successive iterations visit the streams in turn.
func BenchmarkMemoryConditionalAppend(b *testing.B) {
	ctx := b.Context()
	m := memory.New()
	defer m.Close()
	for i := range 10_000 {
		if _, err := m.Append(ctx, []journal.Event{benchEvent(journal.NewTag("account", fmt.Sprint(i%1000)))}, journal.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		tag := journal.NewTag("account", fmt.Sprint(i%1000))
		i++
		q := journal.TagQuery(tag)
		var last journal.Position
		for r, err := range m.Read(ctx, q, journal.ReadOptions{}) {
			if err != nil {
				b.Fatal(err)
			}
			last = r.Position
		}
		if _, err := m.Append(ctx, []journal.Event{benchEvent(tag)}, journal.AppendOptions{
			Condition: &journal.AppendCondition{FailIfEventsMatch: q, After: last},
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryReadStream replays a 100-event stream.
func BenchmarkMemoryReadStream(b *testing.B) {
	ctx := b.Context()
	m := memory.New()
	defer m.Close()
	for range 100 {
		if _, err := m.Append(ctx, []journal.Event{benchEvent("account:1"), benchEvent("account:2")}, journal.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		n := 0
		for _, err := range m.ReadStream(ctx, journal.Stream("account:1"), 1, 0) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 100 {
			b.Fatalf("read %d events, want 100", n)
		}
	}
}
