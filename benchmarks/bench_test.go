package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
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
		j := memory.New()
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
		j := memory.New()
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
	j := memory.New()
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
	j := memory.New()
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

// BenchmarkPostgresAppend32 splits the cost of a 32-event append on Postgres
// (the size of a group commit with 64 writers on one stream): the journal's
// Append with an expected version; raw mode's multi-row INSERT of 32
// event-sized rows; and one INSERT of 32 rows into the journal's own events and
// event_tags tables (all their indexes) written outside the journal, without
// its locks, checks, stream rows or second round trip. Needs
// SCRIBE_TEST_DATABASE_URL.
func BenchmarkPostgresAppend32(b *testing.B) {
	url := pgtest.URL(b)
	ctx := context.Background()
	o := options{DB: url, Pool: 4, RawBatch: 32, Prefix: "benchgo_"}
	be, err := openBackend(ctx, o)
	if err != nil {
		b.Fatal(err)
	}
	defer be.close(ctx)
	raw, err := newRawMode(ctx, cell{Scenario: scenarioHot}, o, be)
	if err != nil {
		b.Fatal(err)
	}
	// Each sub-benchmark run (-count runs them repeatedly in one schema)
	// writes its own stream.
	var runs atomic.Int64
	const n = 32
	b.Run("journal", func(b *testing.B) {
		tag := counterTag(int(runs.Add(1)))
		var st counterState
		for b.Loop() {
			evs := make([]journal.Event, 0, n)
			next := st
			for range n {
				e, _ := decideDeposit(next, deposit{Amount: 1})
				ev, err := depositEvent(tag, e)
				if err != nil {
					b.Fatal(err)
				}
				evs = append(evs, ev)
				next = evolveCounter(next, e)
			}
			if _, err := be.Journal.Append(ctx, evs, journal.AppendOptions{Expect: map[journal.Tag]uint64{tag: st.Version}}); err != nil {
				b.Fatal(err)
			}
			st = next
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("raw", func(b *testing.B) {
		w := raw.newWorker(int(runs.Add(1)))
		for b.Loop() {
			if _, err := w.do(ctx, target{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("journal-tables", func(b *testing.B) {
		s := pgx.Identifier{be.Schema}.Sanitize()
		insert := `WITH ev AS (
			INSERT INTO ` + s + `.events (commit_xid, id, partition, type, schema_version, tags, versions,
				prev_hashes, hashes, data, metadata, recorded_at)
			SELECT pg_current_xact_id()::text::bigint, id, 'default', $7, 1, ARRAY[tag], ARRAY[version],
				prev, hash, data, '{"partition":"default"}', now()
			FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::bytea[], $5::bytea[], $6::bytea[])
				AS r(id, tag, version, data, prev, hash)
			RETURNING commit_xid, seq, tags[1] AS tag, versions[1] AS version)
		INSERT INTO ` + s + `.event_tags (partition, tag, version, commit_xid, seq, type)
		SELECT 'default', tag, version, commit_xid, seq, $7 FROM ev`
		var version int64
		tag := "direct:" + strconv.FormatInt(runs.Add(1), 10)
		for b.Loop() {
			ids, tags, vers := make([]string, n), make([]string, n), make([]int64, n)
			data, prev, hash := make([][]byte, n), make([][]byte, n), make([][]byte, n)
			for k := range n {
				version++
				d, err := json.Marshal(deposited{Amount: 1, Balance: version, Seq: uint64(version), Note: payloadNote})
				if err != nil {
					b.Fatal(err)
				}
				h := sha256.Sum256(d)
				ids[k], tags[k], vers[k] = journal.NewEventID().String(), tag, version
				data[k], prev[k], hash[k] = d, h[:], h[:]
			}
			if _, err := be.Pool.Exec(ctx, insert, ids, tags, vers, data, prev, hash, depositedType); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
	})
}
