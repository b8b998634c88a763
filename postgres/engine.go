package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// The append engine. Every append, alone or in a batch of concurrent appends,
// runs through run: one transaction, one decision in Go (decide, which judges
// duplicates, leases and expected versions by package journal's fence rules
// and conditions by the database's answers) and one write statement (writeSQL)
// whose fence makes the database judge versions, leases, node sessions and
// stored event IDs again, under the batch's advisory locks, before it writes
// anything. The write statement has the last word: a decision it disagrees
// with is rolled back and made again on what the database holds.
//
// An attempt is either
//
//   - direct (one round trip): when the journal knows every touched stream's
//     version and head hash from its own earlier appends (heads), the batch is
//     decided against that knowledge and BEGIN, the locks, the conditions (as
//     assertions), the write statement and COMMIT go out in one pipeline. The
//     write statement's fence checks every stream's version, lease holder,
//     epoch, release flag and node session by the database clock, and the
//     unique event ID index rejects a stored ID; if anything differs from what
//     was assumed, the transaction rolls back and the batch runs again as
//     a read attempt. Nothing is ever written on an assumption: the database
//     decides.
//   - read (two round trips): BEGIN, the locks, and a read of the touched
//     streams, their lease nodes, the stored event IDs and each condition; the
//     batch is decided against what was read; then the write statement and
//     COMMIT. Under the locks nothing the decision read can change except a
//     node session expiring or a lease taken over; the fence catches those,
//     and the batch is read and decided again (up to maxAttempts).
//
// Each append of a batch is judged on its own, in order, as if the appends ran
// one after the other; a rejected append fails alone.

// maxAttempts bounds how often one batch is decided again after its write
// statement's fence failed.
const maxAttempts = 4

// fastStream is a stream's state for one decision, and its running state.
type fastStream struct {
	exists  bool
	before  uint64 // version the decision started from
	version uint64 // running version
	head    journal.Hash
	// last is the position of the stream's newest event when the decision
	// started, zero when unknown or the stream has none. The write statement
	// checks it with the version, so an append's condition can rest on it
	// (see implied).
	last     journal.Position
	node     *string
	inc      *int64
	epoch    int64
	released bool
	// retired: the stream has a tombstone; every append naming it fails
	// with journal.ErrStreamRetired (checkClaims), and the write statement
	// refuses to claim it (its fence), so a direct attempt on a remembered
	// head is fenced and decided again on what is read.
	retired bool
	lease   *journal.Lease // the lease the accepted appends carry
	n       int64
	// newest is 1 + the index in the decision's accepted records of the
	// stream's newest event in this batch, 0 when the batch writes none.
	newest int
	// claimed: an accepted append of the batch writes to the stream, expects
	// a version of it or carries its lease, so the write statement checks
	// the stream's version (and lease) in the database.
	claimed bool
}

type fastNode struct {
	inc    int64
	closed bool
	live   bool
}

type streamKey struct{ partition, tag string }

// batchState is what a decision is made on.
type batchState struct {
	keys map[streamKey]*fastStream
	// nodes are the lease nodes' sessions; nil in a direct attempt, where
	// only the database checks leases.
	nodes    map[string]fastNode
	existing map[uuid.UUID]bool
	condHit  []bool
}

// decision is the outcome of decide: per append an error, a duplicate, or
// accepted records (linked into their chains, positions not yet known).
type decision struct {
	outcomes    []appendOutcome
	accepted    []journal.Record
	acceptedIdx map[int][2]int // append -> [from, to) in accepted
	dups        map[int]bool
}

// prefix queues BEGIN, the batch's advisory locks and the events table lock.
func (j *Journal) prefix(b *pgx.Batch, batch []*appendReq) int {
	locks := map[int64]bool{}
	for _, r := range batch {
		for k, x := range r.locks {
			locks[k] = locks[k] || x
		}
	}
	keys, modes := pgschema.LockArgs(locks)
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(pgschema.LockSQL, keys, modes)
	b.Queue(j.sql(pgschema.LockEventsSQL))
	return b.Len()
}

// run executes batch and returns one outcome per append. With hold (one
// append only), the transaction is left open after the write and release
// commits it.
func (j *Journal) run(ctx context.Context, batch []*appendReq, hold bool) (outcomes []appendOutcome, release func() error) {
	start := time.Now()
	j.stats.batches.Add(1)
	j.stats.appends.Add(int64(len(batch)))
	for _, r := range batch {
		j.stats.events.Add(int64(len(r.events)))
	}
	defer func() { j.stats.batchNanos.Add(int64(time.Since(start))) }()
	failAll := func(err error) ([]appendOutcome, func() error) {
		out := make([]appendOutcome, len(batch))
		for i := range out {
			out[i] = appendOutcome{err: err}
		}
		return out, nil
	}
	conn, err := j.acquireLive(ctx)
	if err != nil {
		return failAll(j.translate("append: acquire connection", err))
	}
	keep := false
	defer func() {
		if !keep {
			conn.Release() // a connection left mid-transaction or broken is discarded by the pool
		}
	}()
	for attempt := 0; ; attempt++ {
		var st *batchState
		if attempt == 0 && !hold && (j.hooks == nil || !j.hooks.readFirst) {
			st = j.heads.known(batch)
		}
		direct := st != nil
		if direct {
			j.stats.direct.Add(1)
		} else {
			j.stats.read.Add(1)
		}
		if !direct {
			st, err = j.readState(ctx, conn, batch)
			if err != nil {
				if !isConnErr(err) {
					_, _ = conn.Exec(ctx, "ROLLBACK")
				}
				return failAll(j.fatalErr(err, false))
			}
		}
		d := j.decide(batch, st)
		if direct && (len(d.accepted) == 0 || len(d.acceptedIdx) < len(batch)) {
			// Something did not go as the remembered heads say: decide
			// on what the database holds.
			continue
		}
		if len(d.accepted) == 0 {
			if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
				conn.Conn().Close(ctx)
			}
			j.resolveDuplicates(ctx, batch, d.dups, d.outcomes)
			return d.outcomes, nil
		}
		fenced, err := j.write(ctx, conn, batch, st, &d, direct, hold)
		if fenced {
			j.stats.fenced.Add(1)
			j.heads.forget(batch)
			if attempt+1 < maxAttempts {
				continue
			}
			err = fmt.Errorf("%w: postgres: the batch's streams kept changing between its checks and its write (%d attempts); retry the append", journal.ErrVersionMismatch, maxAttempts)
		}
		if err != nil {
			j.heads.forget(batch)
			for mi := range batch {
				if _, ok := d.acceptedIdx[mi]; ok {
					d.outcomes[mi] = appendOutcome{err: err}
				}
			}
			// Duplicates of events that were to be written in this batch
			// are as uncertain as those events.
			for mi := range d.dups {
				d.outcomes[mi] = appendOutcome{err: err}
				delete(d.dups, mi)
			}
			j.resolveDuplicates(ctx, batch, d.dups, d.outcomes)
			return d.outcomes, nil
		}
		for mi, span := range d.acceptedIdx {
			d.outcomes[mi] = appendOutcome{res: journal.AppendResult{Records: d.accepted[span[0]:span[1]:span[1]]}}
		}
		if hold {
			keep = true
			return d.outcomes, func() error {
				defer conn.Release()
				if _, err := conn.Exec(context.WithoutCancel(ctx), "COMMIT"); err != nil {
					return j.fatalErr(err, isConnErr(err) && !pgconn.SafeToRetry(err))
				}
				j.learn(st, d.accepted)
				return nil
			}
		}
		j.learn(st, d.accepted)
		j.resolveDuplicates(ctx, batch, d.dups, d.outcomes)
		return d.outcomes, nil
	}
}

// learn remembers the committed heads of a batch's streams: versions, hashes
// and the positions of their newest events (accepted holds the batch's
// records with their positions).
func (j *Journal) learn(st *batchState, accepted []journal.Record) {
	for k, s := range st.keys {
		if !s.claimed {
			continue
		}
		hd := head{version: s.version, hash: s.head, last: s.last}
		if s.newest > 0 {
			hd.last = accepted[s.newest-1].Position
		}
		j.heads.learn(k, hd)
	}
}

// resolveDuplicates reads the stored records of the appends in dups.
func (j *Journal) resolveDuplicates(ctx context.Context, batch []*appendReq, dups map[int]bool, outcomes []appendOutcome) {
	for mi := range dups {
		recs, err := j.recordsByID(ctx, j.pool, batch[mi].events)
		if err != nil {
			outcomes[mi] = appendOutcome{err: err}
			continue
		}
		outcomes[mi] = appendOutcome{res: journal.AppendResult{Records: recs, Duplicate: true}}
	}
}
