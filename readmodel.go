package scribe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
)

// Supervision of a read model's runner: after a failure it may recover
// from (a record its handler keeps failing, which an operator can skip or
// retry with `scribe projections`), the runner starts again after
// restartMin, doubling to restartMax.
const (
	restartMin = time.Second
	restartMax = 30 * time.Second
)

// ReadModel is a read model a Service runs: its rows, its progress and its
// state under supervision. Safe for concurrent use.
type ReadModel struct {
	name     string
	rows     projection.RowReader
	waitFor  func(context.Context, journal.Position) error
	progress func() projection.Progress

	mu  sync.Mutex
	err error // why the runner is not running, nil while it runs
}

// Project registers p (its events must be registered on the Service's
// runtime first) and runs it on the Service's projection store, supervised,
// until Close: o's Owner defaults to "<NodeID>/<p.Name>" and its Logger to
// the Service's. It fails at once when p or o is invalid.
func (s *Service) Project(p projection.RowProjection, o ...projection.Options) (*ReadModel, error) {
	var opts projection.Options
	if len(o) > 1 {
		return nil, fmt.Errorf("%w: scribe: Project takes at most one projection.Options, got %d", journal.ErrConfiguration, len(o))
	}
	if len(o) == 1 {
		opts = o[0]
	}
	if opts.Owner == "" {
		opts.Owner = s.Runtime.Config().NodeID + "/" + p.Name
	}
	if opts.Logger == nil {
		opts.Logger = s.cfg.Logger
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errors.New("scribe: Project after Close; register read models before closing the service")
	}
	m, err := s.project(p, opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.models = append(s.models, m)
	s.mu.Unlock()
	return m, nil
}

func startReadModel[Tx any](s *Service, src projection.Source, store projection.RowStore[Tx], p projection.RowProjection, o projection.Options) (*ReadModel, error) {
	r, err := projection.NewRunner(src, store, projection.Bind(store, p), o)
	if err != nil {
		return nil, err
	}
	m := &ReadModel{name: p.Name, rows: store.ReadRows(r.Key()), waitFor: r.WaitFor, progress: r.Progress}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		m.supervise(s.ctx, r.Run, o)
	}()
	return m, nil
}

// supervise runs run until ctx ends, starting it again after failures it
// may recover from; a configuration error or a newer version ends it for
// good (Err reports why).
func (m *ReadModel) supervise(ctx context.Context, run func(context.Context) error, o projection.Options) {
	wait := restartMin
	for {
		err := run(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			return
		case errors.Is(err, journal.ErrConfiguration), errors.Is(err, journal.ErrStoreNotOpen):
			m.setErr(fmt.Errorf("read model %q stopped: %w", m.name, err))
			o.Logger.Error("read model stopped: fix the configuration and restart", "projection", m.name, "error", err)
			return
		case errors.Is(err, projection.ErrSuperseded):
			m.setErr(fmt.Errorf("read model %q stopped: a newer version of it is active; deploy the build that has it: %w", m.name, err))
			o.Logger.Warn("read model superseded by a newer version", "projection", m.name)
			return
		}
		m.setErr(fmt.Errorf("read model %q failed and restarts in %s: %w", m.name, wait, err))
		o.Logger.Error("read model failed; restarting", "projection", m.name, "in", wait, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		m.setErr(nil)
		wait = min(2*wait, restartMax)
	}
}

func (m *ReadModel) setErr(err error) {
	m.mu.Lock()
	m.err = err
	m.mu.Unlock()
}

// Name is the projection's name.
func (m *ReadModel) Name() string { return m.name }

// Rows reads the read model's committed rows (projection.Collection's Get
// and List take it).
func (m *ReadModel) Rows() projection.RowReader { return m.rows }

// WaitFor waits until the read model has applied the event at pos (a
// command result's record position), or ctx ends: read your own writes.
func (m *ReadModel) WaitFor(ctx context.Context, pos journal.Position) error {
	return m.waitFor(ctx, pos)
}

// Progress is the runner's own view of the read model (state, checkpoint,
// lag, last error).
func (m *ReadModel) Progress() projection.Progress { return m.progress() }

// Err is nil while the read model runs (or stands by for another process's
// runner), else why it does not: stopped for good, or failed and about to
// restart.
func (m *ReadModel) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}
