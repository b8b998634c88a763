package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/scribe-es/scribe/journal"
)

// rawMode inserts rows the size of the benchmark's events straight into a
// scratch table, RawBatch rows per multi-row INSERT, one INSERT per commit:
// the physical ceiling of the database with the same connection pool. A "command"
// of raw mode is one row.
type rawMode struct {
	pool     *pgxpool.Pool
	insert   string
	batch    int
	scenario string
}

func newRawMode(ctx context.Context, c cell, o options, b *backend) (mode, error) {
	if b.Pool == nil {
		return nil, errors.New("raw mode needs Postgres (-db)")
	}
	table := pgx.Identifier{b.Schema, "raw_events"}.Sanitize()
	// The row of a stored event (the journal's events table): position, ID,
	// partition, type, schema version, tags and per-tag versions, hash chain
	// link, JSON data and metadata, recorded-at; with its primary key and the
	// unique event ID, but none of the journal's tag index, stream rows,
	// secondary indexes, locks or checks.
	ddl := `CREATE TABLE ` + table + ` (
		commit_xid     bigint NOT NULL DEFAULT pg_current_xact_id()::text::bigint,
		seq            bigint GENERATED ALWAYS AS IDENTITY,
		id             uuid NOT NULL,
		partition      text NOT NULL,
		type           text NOT NULL,
		schema_version integer NOT NULL,
		tags           text[] NOT NULL,
		versions       bigint[] NOT NULL,
		prev_hashes    bytea NOT NULL,
		hashes         bytea NOT NULL,
		data           bytea NOT NULL,
		metadata       bytea NOT NULL,
		recorded_at    timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (commit_xid, seq),
		UNIQUE (id))`
	if _, err := b.Pool.Exec(ctx, ddl); err != nil {
		return nil, fmt.Errorf("raw: create scratch table: %w", err)
	}
	insert := `INSERT INTO ` + table + ` (id, partition, type, schema_version, tags, versions, prev_hashes, hashes, data, metadata)
		SELECT id, 'default', $4, 1, ARRAY[tag], ARRAY[version], prev_hash, hash, data, '{"partition":"default"}'
		FROM unnest($1::uuid[], $2::text[], $3::bigint[], $5::bytea[], $6::bytea[], $7::bytea[])
			AS r(id, tag, version, data, prev_hash, hash)`
	return &rawMode{pool: b.Pool, insert: insert, batch: o.RawBatch, scenario: c.Scenario}, nil
}

func (m *rawMode) newWorker(id int) worker {
	return &rawWorker{m: m, versions: map[int]int64{}}
}

func (m *rawMode) close(context.Context) error { return nil }

type rawWorker struct {
	m        *rawMode
	versions map[int]int64
	ids      []string
	tags     []string
	vers     []int64
	data     [][]byte
	prev     [][]byte
	hash     [][]byte
}

// do inserts one batch of rows for target t's stream (transfer: the source
// account) in one statement and one commit.
func (w *rawWorker) do(ctx context.Context, t target) (outcome, error) {
	n := w.m.batch
	w.ids, w.tags, w.vers, w.data, w.prev, w.hash = w.ids[:0], w.tags[:0], w.vers[:0], w.data[:0], w.prev[:0], w.hash[:0]
	tag := counterTag(t.A)
	if w.m.scenario == scenarioTransfer {
		tag = accountTag(t.A)
	}
	var prev [32]byte
	for range n {
		v := w.versions[t.A] + 1
		w.versions[t.A] = v
		data, err := json.Marshal(deposited{Amount: 1, Balance: v, Seq: uint64(v), Note: payloadNote})
		if err != nil {
			return outcome{}, err
		}
		h := sha256.Sum256(data)
		w.ids = append(w.ids, journal.NewEventID().String())
		w.tags = append(w.tags, string(tag))
		w.vers = append(w.vers, v)
		w.data = append(w.data, data)
		w.prev = append(w.prev, prev[:])
		w.hash = append(w.hash, h[:])
		prev = h
	}
	if _, err := w.m.pool.Exec(ctx, w.m.insert, w.ids, w.tags, w.vers, depositedType, w.data, w.prev, w.hash); err != nil {
		return outcome{}, fmt.Errorf("raw insert of %d rows: %w", n, err)
	}
	return outcome{Commands: n, Events: n}, nil
}
