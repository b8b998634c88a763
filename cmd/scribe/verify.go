package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

func verifyCommand() *command {
	var partition, tag string
	var workers int
	var archive bool
	return &command{
		name: "verify",
		summary: "verify the hash chain of every stream, the untagged chains ($untagged:TYPE) included (of a partition, or one tag): report the first broken link of each " +
			"stream; exit status 1 on any break",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&partition, "partition", "", "only this partition (default: every partition; with -tag: default)")
			fs.StringVar(&tag, "tag", "", "only this stream")
			fs.IntVar(&workers, "workers", 4, "streams verified at once (each uses one connection at a time)")
			fs.BoolVar(&archive, "archive", false, "also verify each stream's archived events against its checkpoint "+
				"(by default a stream is verified from its checkpoint on: its hot events)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if workers < 1 {
				return usagef("-workers %d: give at least 1", workers)
			}
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			var streams []journal.StreamID
			if tag != "" {
				streams = []journal.StreamID{journal.StreamID{Partition: partition, Tag: journal.Tag(tag)}.Normalize()}
			} else {
				if streams, err = listStreams(e.ctx, s.journal, partition); err != nil {
					return err
				}
				// Streams whose record was removed are verified too (and
				// reported broken): a listing alone would skip them.
				unrecorded, err := s.journal.UnrecordedStreams(e.ctx, partition)
				if err != nil {
					return err
				}
				streams = append(streams, unrecorded...)
			}
			v := &verifier{e: e, j: s.journal, total: len(streams), progress: isTerminal(e.stderr), archive: archive}
			err = v.run(streams, workers)
			v.clearProgress()
			if err != nil {
				return err
			}
			if tag != "" && v.events == 0 && v.broken == 0 {
				return fmt.Errorf("stream %s has no events to verify; check the tag and -partition, or list streams with `scribe streams list`", streams[0])
			}
			var unchained uint64
			if tag == "" {
				if unchained, err = s.journal.UnchainedEvents(e.ctx, partition); err != nil {
					return err
				}
			}
			return v.report(unchained)
		},
	}
}

// listStreams returns every stream with events of partition ("" for all).
func listStreams(ctx context.Context, j *postgres.Journal, partition string) ([]journal.StreamID, error) {
	var out []journal.StreamID
	q := postgres.StreamsQuery{Partition: partition, Limit: streamsPage}
	for {
		page, err := j.Streams(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, s := range page {
			out = append(out, s.Stream)
		}
		if len(page) < q.Limit {
			return out, nil
		}
		q.After = page[len(page)-1].Stream
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// verifier walks streams and collects what broke.
type verifier struct {
	e        *env
	j        *postgres.Journal
	total    int
	done     int
	events   uint64
	broken   int
	progress bool
	shown    time.Time
	// archive: verify each stream's archived part too (verifyOne).
	archive bool
}

// verifyOne verifies one stream: its hot part from its checkpoint and, with
// archive, its archived part against the checkpoint first. It returns the
// number of events verified.
func (v *verifier) verifyOne(ctx context.Context, stream journal.StreamID) (uint64, error) {
	if !v.archive {
		return journal.VerifyStream(ctx, v.j, stream)
	}
	sum, err := v.j.TagSummary(ctx, stream)
	if err != nil {
		return 0, err
	}
	a, err := journal.VerifyArchive(ctx, v.j, stream, sum.Cut)
	if err != nil {
		return a, err
	}
	n, err := journal.VerifyStream(ctx, v.j, stream)
	return a + n, err
}

// progressEvery is how often the progress line is redrawn.
const progressEvery = 100 * time.Millisecond

func (v *verifier) showProgress() {
	if !v.progress || time.Since(v.shown) < progressEvery {
		return
	}
	v.shown = time.Now()
	fmt.Fprintf(v.e.stderr, "\rverifying: %d/%d streams (%d%%), %d events", v.done, v.total, v.done*100/max(v.total, 1), v.events)
}

func (v *verifier) clearProgress() {
	if v.progress && !v.shown.IsZero() {
		fmt.Fprint(v.e.stderr, "\r\033[K")
	}
}

// checked is the outcome of one stream's verification.
type checked struct {
	i   int
	n   uint64
	err error
}

// run verifies streams with up to workers at once and records the outcomes
// in the order of streams, each as soon as it and every stream before it
// are done. It stops at the first failure to read the database at all.
func (v *verifier) run(streams []journal.StreamID, workers int) error {
	ctx, cancel := context.WithCancel(v.e.ctx)
	jobs := make(chan int)
	results := make(chan checked)
	var wg sync.WaitGroup
	defer func() {
		cancel() // unblocks the feeder and workers, then waits for them
		wg.Wait()
	}()
	for range min(workers, max(len(streams), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				n, err := v.verifyOne(ctx, streams[i])
				select {
				case results <- checked{i: i, n: n, err: err}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for i := range streams {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	pending := make(map[int]checked)
	for next := 0; next < len(streams); {
		select {
		case c := <-results:
			pending[c.i] = c
		case <-ctx.Done():
			return ctx.Err()
		}
		for {
			c, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			if err := v.record(streams[next], c.n, c.err); err != nil {
				return err
			}
			next++
		}
	}
	return nil
}

// record notes one stream's outcome, reporting a broken link at once. It
// fails only when the database could not be read at all or ctx ended.
func (v *verifier) record(stream journal.StreamID, n uint64, err error) error {
	v.done++
	v.events += n
	defer v.showProgress()
	if err == nil {
		return nil
	}
	if v.e.ctx.Err() != nil || errors.Is(err, journal.ErrUnavailable) || errors.Is(err, journal.ErrStoreNotOpen) {
		return err
	}
	v.broken++
	var ce *journal.ChainError
	if !errors.As(err, &ce) {
		// The stream cannot even be read back (a row altered into
		// something the journal cannot decode): as broken as a bad hash.
		ce = &journal.ChainError{Stream: stream, Version: n + 1, Reason: fmt.Sprintf("the event after version %d cannot be read: %v", n, err)}
	}
	v.clearProgress()
	if v.e.opts.json {
		return emitJSON(v.e.stdout, map[string]any{
			"broken": true, "partition": ce.Stream.Normalize().Partition, "tag": ce.Stream.Tag,
			"version": ce.Version, "position": ce.Position, "verifiedEvents": n, "reason": ce.Reason,
		})
	}
	_, err = fmt.Fprintf(v.e.stdout, "BROKEN %s at version %d, position %s: %s\n", ce.Stream, ce.Version, ce.Position, ce.Reason)
	return err
}

// report prints the summary and fails when anything was broken or unchained.
func (v *verifier) report(unchained uint64) error {
	if v.e.opts.json {
		if err := emitJSON(v.e.stdout, map[string]any{"streams": v.total, "events": v.events, "broken": v.broken, "unchainedEvents": unchained}); err != nil {
			return err
		}
	} else {
		if unchained > 0 {
			fmt.Fprintf(v.e.stdout, "UNCHAINED %d events are linked into no hash chain (inserted around the journal, or written by a Scribe version that stored untagged events unchained); list them with: SELECT commit_xid, seq, id, type FROM %s.events WHERE cardinality(tags) = 0\n",
				unchained, pgx.Identifier{v.e.opts.schema}.Sanitize())
		}
		if v.broken == 0 && unchained == 0 {
			fmt.Fprintf(v.e.stdout, "verified %d streams, %d events: every chain is intact\n", v.total, v.events)
		} else {
			fmt.Fprintf(v.e.stdout, "verified %d streams, %d events: %d broken chain(s), %d unchained event(s)\n", v.total, v.events, v.broken, unchained)
		}
	}
	if v.broken > 0 || unchained > 0 {
		return errFailed
	}
	return nil
}
