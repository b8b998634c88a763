package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/hallgren/eventsourcing"
	esql "github.com/hallgren/eventsourcing/eventstore/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// The peer a Go team would pick instead of Scribe: hallgren/eventsourcing
// (aggregate root and repository, v0.7.0; core v0.5.2) on its Postgres event
// store (eventstore/sql v0.7.0, database/sql), used as its README shows:
// an aggregate that embeds eventsourcing.AggregateRoot and implements
// Register and Transition, a command method that tracks the decided event,
// and an EventRepository whose Get folds the aggregate from its events and
// whose Save appends the tracked events.
//
// What the peer does per command, from its code (eventrepository.go,
// eventstore/sql/postgres.go) and counted by the harness's tracer:
//
//   - Get: one query of every event of the aggregate (no snapshot), in an
//     implicit transaction; each row's data and metadata are decoded with
//     encoding/json and passed to Transition.
//   - Save: one transaction of four round trips: BEGIN; SELECT the
//     aggregate's newest version; the expected version is checked in Go
//     (core.ErrConcurrency if it moved); one INSERT … RETURNING per event;
//     COMMIT. Two writers that read the same version both pass the check,
//     and the second INSERT fails on the table's unique (id, type, version)
//     key instead (SQLSTATE 23505), which the repository returns wrapped as
//     "error from event store", not as ErrConcurrency.
//
// The worker is the peer's users' loop: Get a fresh aggregate, run the
// command, Save; on a version conflict of either kind, reload and retry at
// once (no backoff, no attempt limit: the window's end is every command's
// deadline), which is the peer at its fastest under contention (occ-fast's
// no-backoff loop beats occ's backoff on a hot stream).
//
// The peer runs in a schema of its own (the measurement's schema with the
// suffix _peer, so its events table does not meet Scribe's), through the
// pgx stdlib driver with o.Pool connections open and idle at most (the
// harness's pool size) and the server's durable commits
// (synchronous_commit as configured, on by default), and is dropped after
// the measurement.
type hallgrenMode struct {
	db       *sql.DB
	repo     *eventsourcing.EventRepository
	counter  *statementCounter
	dropPeer func(context.Context) error
	load     bool // load scenario: every command is a Get of the seeded aggregate

	storeConflicts  atomic.Int64 // conflicts the store's version check caught
	uniqueConflicts atomic.Int64 // conflicts that surfaced as a unique violation
}

// hallgrenCounter is the counter as the peer's aggregate: the same state,
// decide and evolve functions as every other mode, and the same deposited
// event, which the peer's JSON encoder stores as the same bytes.
type hallgrenCounter struct {
	eventsourcing.AggregateRoot
	state counterState
}

// Register declares the counter's one event to the peer's repository.
func (c *hallgrenCounter) Register(r eventsourcing.RegisterFunc) { r(&deposited{}) }

// Transition folds one event into the counter.
func (c *hallgrenCounter) Transition(e eventsourcing.Event) {
	if d, ok := e.Data().(*deposited); ok {
		c.state = evolveCounter(c.state, *d)
	}
}

// deposit decides a deposit and tracks its event on the aggregate.
func (c *hallgrenCounter) deposit(amount int64) error {
	ev, err := decideDeposit(c.state, deposit{Amount: amount})
	if err != nil {
		return err
	}
	c.TrackChange(c, &ev)
	return nil
}

// newHallgrenMode creates the peer's schema and opens its store there.
func newHallgrenMode(ctx context.Context, c cell, o options, b *backend) (*hallgrenMode, error) {
	if b.Pool == nil {
		return nil, errors.New("hallgren mode needs Postgres (-db)")
	}
	schema := b.Schema + "_peer"
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := b.Pool.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		return nil, fmt.Errorf("hallgren: create schema %s: %w", schema, err)
	}
	m := &hallgrenMode{counter: &statementCounter{}, load: c.Scenario == scenarioLoad}
	m.dropPeer = func(ctx context.Context) error {
		if _, err := b.Pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+ident+" CASCADE"); err != nil {
			return fmt.Errorf("hallgren: drop schema %s: %w", schema, err)
		}
		return nil
	}
	cfg, err := pgx.ParseConfig(o.DB)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("-db: %w", err), m.dropPeer(ctx))
	}
	cfg.RuntimeParams["search_path"] = schema
	cfg.Tracer = m.counter
	m.db = stdlib.OpenDB(*cfg)
	m.db.SetMaxOpenConns(o.Pool)
	m.db.SetMaxIdleConns(o.Pool)
	// NewPostgres creates the store's table and index (IF NOT EXISTS, in the
	// first schema of the search path).
	store, err := esql.NewPostgres(m.db)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("hallgren: open store in %s: %w", schema, err), m.close(ctx))
	}
	m.repo = eventsourcing.NewEventRepository(store)
	m.repo.Register(&hallgrenCounter{})
	if m.load {
		if err := m.seed(ctx); err != nil {
			return nil, errors.Join(err, m.close(ctx))
		}
	}
	return m, nil
}

// seed saves the load scenario's aggregate: loadEvents deposits, 100 per Save.
func (m *hallgrenMode) seed(context.Context) error {
	c := &hallgrenCounter{}
	if err := c.SetID(loadTarget.ID); err != nil {
		return err
	}
	for c.state.Version < loadEvents {
		for range min(100, loadEvents-int(c.state.Version)) {
			if err := c.deposit(1); err != nil {
				return err
			}
		}
		if err := m.repo.Save(c); err != nil {
			return fmt.Errorf("hallgren: seed: %w", err)
		}
	}
	return nil
}

// newWorker returns the mode itself: the repository is safe for concurrent
// use and every command starts from a fresh aggregate.
func (m *hallgrenMode) newWorker(int) worker { return m }

func (m *hallgrenMode) statementCounter() *statementCounter { return m.counter }

func (m *hallgrenMode) cellNote() string {
	s, u := m.storeConflicts.Load(), m.uniqueConflicts.Load()
	if s+u == 0 {
		return ""
	}
	return fmt.Sprintf("hallgren conflicts (warm-up included): %d caught by the store's version check, %d surfaced as a unique violation (SQLSTATE 23505)", s, u)
}

func (m *hallgrenMode) close(ctx context.Context) error {
	var errs []error
	if m.db != nil {
		errs = append(errs, m.db.Close())
	}
	return errors.Join(append(errs, m.dropPeer(ctx))...)
}

// do runs one command on counter t.A (load: one Get of the seeded
// aggregate).
func (m *hallgrenMode) do(ctx context.Context, t target) (outcome, error) {
	id := strconv.Itoa(t.A)
	if m.load {
		c := &hallgrenCounter{}
		if err := m.repo.GetWithContext(ctx, id, c); err != nil {
			return outcome{}, fmt.Errorf("hallgren: get %s: %w", id, err)
		}
		if c.state.Version != loadEvents {
			return outcome{}, fmt.Errorf("hallgren: get %s folded %d events, want %d", id, c.state.Version, loadEvents)
		}
		return outcome{Commands: 1, Events: loadEvents}, nil
	}
	for attempt := 1; ; attempt++ {
		c := &hallgrenCounter{}
		err := m.repo.GetWithContext(ctx, id, c)
		if errors.Is(err, eventsourcing.ErrAggregateNotFound) {
			err = c.SetID(id) // the counter's first command
		}
		if err != nil {
			return outcome{}, fmt.Errorf("hallgren: get %s: %w", id, err)
		}
		if err := c.deposit(1); err != nil {
			return outcome{}, err
		}
		err = m.repo.Save(c)
		if err == nil {
			return outcome{Commands: 1, Events: 1, Retries: attempt - 1}, nil
		}
		var pgErr *pgconn.PgError
		switch {
		case errors.Is(err, eventsourcing.ErrConcurrency):
			m.storeConflicts.Add(1)
		case errors.As(err, &pgErr) && pgErr.Code == "23505":
			m.uniqueConflicts.Add(1)
		default:
			return outcome{}, fmt.Errorf("hallgren: save %s: %w", id, err)
		}
		if err := ctx.Err(); err != nil {
			return outcome{}, err
		}
	}
}
