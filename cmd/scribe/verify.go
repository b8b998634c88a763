package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/internal/ordered"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

func verifyCommand() *command {
	var partition, tag string
	var workers int
	var archive bool
	var keys, keysDB string
	var checkpoints, pubkey string
	return &command{
		name: "verify",
		summary: "verify the hash chain of every stream, the untagged chains ($untagged:TYPE) included (of a partition, or one tag): report the first broken link of each " +
			"stream; exit status 1 on any break",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&partition, "partition", "", "only this partition (default: every partition; with -tag: default)")
			fs.StringVar(&tag, "tag", "", "only this stream")
			fs.IntVar(&workers, "workers", 4, "streams verified at once (each uses one connection at a time)")
			keySchemaFlag(fs, &keys)
			keysDBFlag(fs, &keysDB)
			fs.BoolVar(&archive, "archive", false, "also verify each stream's archived events against its checkpoint "+
				"(by default a stream is verified from its checkpoint on: its hot events)")
			fs.StringVar(&checkpoints, "checkpoints", "", "also check every signed checkpoint file in this directory (written by scribe checkpoint): its signature "+
				"with -pubkey, and that the current chains still hold each event it covers (names the first event that differs)")
			fs.StringVar(&pubkey, "pubkey", "", "the public key file of the checkpoints' signer (with -checkpoints)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if workers < 1 {
				return usagef("-workers %d: give at least 1", workers)
			}
			if (checkpoints == "") != (pubkey == "") {
				return usagef("give -checkpoints DIR and -pubkey FILE together")
			}
			var signed *checkpointSet
			if checkpoints != "" {
				var err error
				if signed, err = readCheckpoints(checkpoints, pubkey); err != nil {
					return err
				}
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
				if streams, err = listStreams(e.ctx, s.admin, partition); err != nil {
					return err
				}
				// Streams whose record was removed are verified too (and
				// reported broken): a listing alone would skip them.
				unrecorded, err := s.admin.UnrecordedStreams(e.ctx, partition)
				if err != nil {
					return err
				}
				streams = append(streams, unrecorded...)
			}
			erased, err := e.erasedSubjects(s, e.keyStoreConfig(keys), keysDB)
			if err != nil {
				return err
			}
			v := &verifier{e: e, j: s.journal, total: len(streams), progress: isTerminal(e.stderr), archive: archive,
				erased: erased, erasedEvents: map[uuid.UUID]bool{}}
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
				if unchained, err = s.admin.UnchainedEvents(e.ctx, partition); err != nil {
					return err
				}
			}
			checkpointsOK := true
			if signed != nil {
				include := func(id journal.StreamID) bool {
					return (partition == "" || id.Partition == partition) && (tag == "" || id == streams[0])
				}
				if checkpointsOK, err = signed.check(e, evidenceSource{s.journal, s.admin}, include, workers); err != nil {
					return err
				}
			}
			if err := v.report(unchained); err != nil || checkpointsOK {
				return err
			}
			return errFailed
		},
	}
}

// listStreams returns every stream with events of partition ("" for all).
func listStreams(ctx context.Context, a *pgadmin.Admin, partition string) ([]journal.StreamID, error) {
	var out []journal.StreamID
	for id, err := range a.ListStreams(ctx, partition) {
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
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
	// erased are the subjects the key store reports erased (nil: no key
	// store); erasedEvents collects the IDs of the verified events that hold
	// sealed personal data of one of them: their chain links verify (the
	// chains cover the ciphertext), but what was sealed can no longer be
	// read, so their content is verified only up to the erased fields.
	erased       map[string]bool
	mu           sync.Mutex // guards erasedEvents (workers run verifyOne at once)
	erasedEvents map[uuid.UUID]bool
}

// erasedSubjects lists the subjects the key store in cfg's schema, on
// keysDB's database (-keys-db, $SCRIBE_KEYS_DATABASE_URL, else the
// journal's), reports erased; nil when the schema holds no key store (a
// journal used without erasure; said on stderr when the key store's
// database was given).
func (e *env) erasedSubjects(s *store, cfg postgres.KeyStoreConfig, keysDB string) (map[string]bool, error) {
	pool, closeKeys, err := e.keysPool(s.pool, keysDB)
	if err != nil {
		return nil, err
	}
	defer closeKeys()
	exists, err := e.keyStoreExistsOn(pool, cfg)
	if err != nil {
		return nil, err
	}
	if !exists {
		if pool != s.pool {
			fmt.Fprintf(e.stderr, "scribe: note: the key store's database holds no key store schema %q, so events of erased subjects are not counted; check -keys and -keys-db\n",
				cmp.Or(cfg.Schema, postgres.DefaultKeyStoreSchema))
		}
		return nil, nil
	}
	ks, err := postgres.NewKeyStore(pool, cfg)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	const page = 1000
	for after := ""; ; {
		subs, err := ks.Subjects(e.ctx, after, page)
		if err != nil {
			return nil, err
		}
		for _, sub := range subs {
			if sub.Erased {
				out[sub.ID] = true
			}
		}
		if len(subs) < page {
			return out, nil
		}
		after = subs[len(subs)-1].ID
	}
}

// erasedReader is the journal as VerifyStream and VerifyArchive read it, with
// each record read noted by the verifier (noteErased).
type erasedReader struct {
	*postgres.Journal
	v *verifier
}

func (r erasedReader) ReadStream(ctx context.Context, stream journal.StreamID, fromVersion uint64, limit int) iter.Seq2[journal.Record, error] {
	return r.v.noteErased(r.Journal.ReadStream(ctx, stream, fromVersion, limit))
}

func (r erasedReader) ReadStreamThroughIndex(ctx context.Context, stream journal.StreamID, fromVersion uint64, limit int) iter.Seq2[journal.Record, error] {
	return r.v.noteErased(r.Journal.ReadStreamThroughIndex(ctx, stream, fromVersion, limit))
}

func (r erasedReader) ReadStreamWithArchive(ctx context.Context, stream journal.StreamID, fromVersion uint64, limit int) iter.Seq2[journal.Record, error] {
	return r.v.noteErased(r.Journal.ReadStreamWithArchive(ctx, stream, fromVersion, limit))
}

// noteErased passes records on, noting those that hold sealed data of an
// erased subject.
func (v *verifier) noteErased(seq iter.Seq2[journal.Record, error]) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		for r, err := range seq {
			if err == nil && len(v.erased) > 0 && erasure.HasSealed(r.Data) {
				// A record whose envelopes cannot be parsed is judged by its
				// chain link, which VerifyStream checks next; it is not
				// counted here.
				subjects, _ := erasure.Subjects(r.Data)
				for _, sub := range subjects {
					if v.erased[sub] {
						v.mu.Lock()
						v.erasedEvents[r.ID] = true
						v.mu.Unlock()
						break
					}
				}
			}
			if !yield(r, err) {
				return
			}
		}
	}
}

// verifyOne verifies one stream: its hot part from its checkpoint and, with
// archive, its archived part against the checkpoint first. It returns the
// number of events verified.
func (v *verifier) verifyOne(ctx context.Context, stream journal.StreamID) (uint64, error) {
	var rd journal.Reader = v.j
	if len(v.erased) > 0 {
		rd = erasedReader{Journal: v.j, v: v}
	}
	if !v.archive {
		return journal.VerifyStream(ctx, rd, stream)
	}
	sum, err := v.j.TagSummary(ctx, stream)
	if err != nil {
		return 0, err
	}
	ar := journal.ArchiveReader(v.j)
	if len(v.erased) > 0 {
		ar = erasedReader{Journal: v.j, v: v}
	}
	a, err := journal.VerifyArchive(ctx, ar, stream, sum.Cut)
	if err != nil {
		return a, err
	}
	n, err := journal.VerifyStream(ctx, rd, stream)
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
	n   uint64
	err error
}

// run verifies streams with up to workers at once and records the outcomes
// in the order of streams, each as soon as it and every stream before it
// are done. It stops at the first failure to read the database at all.
func (v *verifier) run(streams []journal.StreamID, workers int) error {
	return ordered.Each(v.e.ctx, len(streams), workers, func(ctx context.Context, i int) checked {
		n, err := v.verifyOne(ctx, streams[i])
		return checked{n: n, err: err}
	}, func(i int, c checked) error {
		return v.record(streams[i], c.n, c.err)
	})
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

// report prints the summary and fails when anything was broken or unchained
// (events with erased content verify: they are counted, not failed).
func (v *verifier) report(unchained uint64) error {
	if v.e.opts.json {
		if err := emitJSON(v.e.stdout, map[string]any{"streams": v.total, "events": v.events, "broken": v.broken, "unchainedEvents": unchained,
			"erasedEvents": len(v.erasedEvents)}); err != nil {
			return err
		}
	} else {
		if unchained > 0 {
			fmt.Fprintf(v.e.stdout, "UNCHAINED %d events are linked into no hash chain (inserted around the journal, or written by a Scribe version that stored untagged events unchained); list them with: SELECT commit_xid, seq, id, type FROM %s.events WHERE cardinality(tags) = 0\n",
				unchained, pgx.Identifier{v.e.opts.schema}.Sanitize())
		}
		if n := len(v.erasedEvents); n > 0 {
			fmt.Fprintf(v.e.stdout, "ERASED %d event(s) hold personal data of erased subjects: their chain links verify (the chains cover the ciphertext), but their erased fields can no longer be read, so their content is verified up to those fields\n", n)
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
