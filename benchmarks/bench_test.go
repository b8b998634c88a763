package main

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/scribe-es/scribe/journal"
)

// Go benchmarks of the hot paths every mode shares. Run them with
//
//	go test -run '^$' -bench . -benchmem ./benchmarks

// BenchmarkDecideEvolve measures one pure decision and its fold into the state.
func BenchmarkDecideEvolve(b *testing.B) {
	var st counterState
	for b.Loop() {
		e, err := decideDeposit(st, deposit{Amount: 1})
		if err != nil {
			b.Fatal(err)
		}
		st = evolveCounter(st, e)
	}
}

// BenchmarkDecideTransfer measures one DCB transfer decision and fold.
func BenchmarkDecideTransfer(b *testing.B) {
	st := newTransferState(accountTag(1), accountTag(2))
	c := transfer{From: accountTag(1), To: accountTag(2), Amount: 1}
	for b.Loop() {
		e, err := decideTransfer(st, c)
		if err != nil {
			b.Fatal(err)
		}
		st = evolveTransfer(st, e)
	}
}

// BenchmarkEventCodec measures encoding a decided event into a journal event
// and decoding a stored record back into the state.
func BenchmarkEventCodec(b *testing.B) {
	tag := counterTag(1)
	e := deposited{Amount: 1, Balance: 123456, Seq: 123456, Note: payloadNote}
	ev, err := depositEvent(tag, e)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(ev.Data)), "payload-bytes")
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			if _, err := depositEvent(tag, e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		r := journal.Record{Event: ev}
		for b.Loop() {
			if _, err := foldCounter(counterState{}, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal-only", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(e); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMemoryAppend measures one single-event append with an expected
// version to the memory journal: per stream, and on one hot stream from
// parallel goroutines (each with its own stream, so none conflicts).
func BenchmarkMemoryAppend(b *testing.B) {
	ctx := context.Background()
	b.Run("one-stream", func(b *testing.B) {
		j := journal.NewMemory()
		defer j.Close()
		tag := counterTag(0)
		var st counterState
		for b.Loop() {
			e, _ := decideDeposit(st, deposit{Amount: 1})
			ev, err := depositEvent(tag, e)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := j.Append(ctx, []journal.Event{ev}, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: st.Version}}); err != nil {
				b.Fatal(err)
			}
			st = evolveCounter(st, e)
		}
	})
	b.Run("parallel-streams", func(b *testing.B) {
		j := journal.NewMemory()
		defer j.Close()
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			tag := counterTag(int(next.Add(1)))
			var st counterState
			for pb.Next() {
				e, _ := decideDeposit(st, deposit{Amount: 1})
				ev, err := depositEvent(tag, e)
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := j.Append(ctx, []journal.Event{ev}, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: st.Version}}); err != nil {
					b.Error(err)
					return
				}
				st = evolveCounter(st, e)
			}
		})
	})
}

// BenchmarkOCCFastHotStream measures the occ-fast loop of one writer on one
// stream of the memory journal (read tail, decide, append with expectation).
func BenchmarkOCCFastHotStream(b *testing.B) {
	j := journal.NewMemory()
	defer j.Close()
	w := (&occMode{j: j, scenario: scenarioHot, fast: true}).newWorker(0)
	ctx := context.Background()
	for b.Loop() {
		if _, err := w.do(ctx, target{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkActorExecute measures one command through the actor path on the
// memory journal: each parallel goroutine owns one stream (spread).
func BenchmarkActorExecute(b *testing.B) {
	ctx := context.Background()
	j := journal.NewMemory()
	defer j.Close()
	m, err := newActorMode(ctx, cell{Scenario: scenarioSpread}, &backend{Journal: j, Sessions: j})
	if err != nil {
		b.Fatal(err)
	}
	defer m.close(ctx)
	w := m.newWorker(0)
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		t := target{A: int(next.Add(1))}
		for pb.Next() {
			if _, err := w.do(ctx, t); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
