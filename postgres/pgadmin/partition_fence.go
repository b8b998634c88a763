package pgadmin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// fence revokes every lease of the partition on the source and refuses new
// ones. The partition's advisory lock, exclusive, waits for the partition's
// appends and Acquires in flight (each holds it shared, taken before its
// statements) and holds new ones off until the fence commits: an append
// claimed before it is copied; any later one finds its lease's epoch gone,
// and an Acquire that waited sees the fence (its statement reads after the
// lock). Other partitions' appends and Acquires never wait for it.
func (mv *mover) fence(ctx context.Context) error {
	tx, err := mv.m.Source.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, mv.srcS.LockKey(pgschema.LockPartition, mv.m.Partition, "")); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, mv.srcSQL(`INSERT INTO __S__.partition_fences (partition, state, moved_to) VALUES ($1, 'outgoing', $2)
		ON CONFLICT (partition) DO NOTHING`), mv.m.Partition, mv.m.To); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, mv.srcSQL(`UPDATE __S__.streams SET released = true, epoch = nextval('__S__.stream_epochs')
		WHERE partition = $1 AND lease_node IS NOT NULL`), mv.m.Partition); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// changedSince compares the fenced source's partition with what the move
// copied: more events (appends without a lease since the copy) send the
// move back to MoveCopy, a changed digest (the archiver moved a cut or
// archived events, RetireStream set a tombstone) back to MoveStreams; ""
// when nothing changed.
func (mv *mover) changedSince(ctx context.Context, q rowQuerier) (MoveStep, error) {
	d, total, err := mv.digest(ctx, q)
	switch {
	case err != nil:
		return "", err
	case total > mv.rec.copied:
		return MoveCopy, nil
	case total < mv.rec.copied:
		return "", refusedf("the source holds %d events of the partition, fewer than the %d the move copied: events were deleted on the source during the move; inspect it", total, mv.rec.copied)
	case d != mv.rec.synced:
		return MoveStreams, nil
	}
	return "", nil
}

// verify checks the copy on the target against the fenced source: equal
// event counts (hot and archived), every stream at the source's version,
// chain head, cut and tombstone, and every chain verified on the target,
// its archived part against its cut (journal.VerifyArchive) and its hot part
// (journal.VerifyStream). A source that changed since the copy sends the
// move back (changedSince).
func (mv *mover) verify(ctx context.Context) (MoveStep, error) {
	p := mv.m.Partition
	if back, err := mv.changedSince(ctx, mv.m.Source); back != "" || err != nil {
		return back, err
	}
	var dstTotal, dstArchived int64
	if err := mv.m.Target.QueryRow(ctx, mv.dstSQL(`SELECT (SELECT count(*) FROM __S__.events WHERE partition = $1),
			(SELECT count(*) FROM __S__.events_archive WHERE partition = $1)`), p).Scan(&dstTotal, &dstArchived); err != nil {
		return "", err
	}
	if dstTotal += dstArchived; dstTotal != mv.rec.copied {
		return "", refusedf("the target holds %d events of the partition and the move copied %d: something else wrote the partition on the target during the move (an append without a lease; the target refuses its leases until the switch); inspect the target", dstTotal, mv.rec.copied)
	}
	if dstArchived < mv.rec.synced.archived {
		return MoveStreams, nil
	}
	want, err := readStreamStates(ctx, mv.m.Source, mv.srcSQL(streamStatesSQL), p)
	if err != nil {
		return "", err
	}
	got, err := readStreamStates(ctx, mv.m.Target, mv.dstSQL(streamStatesSQL), p)
	if err != nil {
		return "", err
	}
	if len(got) != len(want) {
		return "", refusedf("the source has %d streams in the partition and the target %d after the copy; inspect the target", len(want), len(got))
	}
	tombstones := 0
	for tag, w := range want {
		g, ok := got[tag]
		switch {
		case !ok || g.version != w.version || !bytes.Equal(g.head, w.head):
			return "", refusedf("stream %s/%s is at version %d on the source but %d on the target, or its chain head differs; inspect the target", p, tag, w.version, g.version)
		case g.cut < w.cut || (w.retired && !g.retired):
			return MoveStreams, nil // cut or retired since the streams were copied
		case g.cut == w.cut && !bytes.Equal(g.cutHash, w.cutHash):
			return "", refusedf("stream %s/%s is cut at version %d on both, but the cut's chain hash differs; inspect the target", p, tag, w.cut)
		}
		if w.retired {
			tombstones++
		}
	}
	if err := mv.verifyChains(ctx, want); err != nil {
		return "", err
	}
	mv.report.Streams, mv.report.Tombstones = len(want), tombstones
	return MoveSwitch, nil
}

// verifyChains verifies the chains of the streams on the target (each
// against its version on the source), several at a time (one less than the
// target pool's connections, at most 8), and returns the first failure.
func (mv *mover) verifyChains(ctx context.Context, want map[string]streamState) error {
	workers := min(8, max(1, int(mv.m.Target.Config().MaxConns)-1))
	vctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tags := make(chan string)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tag := range tags {
				n, err := mv.verifyChain(vctx, journal.StreamID{Partition: mv.m.Partition, Tag: journal.Tag(tag)})
				if err == nil && int64(n) != want[tag].version {
					err = refusedf("stream %s/%s verified %d events on the target, want %d; inspect the target", mv.m.Partition, tag, n, want[tag].version)
				}
				if err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
	for tag := range want {
		select {
		case tags <- tag:
			continue
		case <-vctx.Done():
		}
		break
	}
	close(tags)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// verifyChain verifies a stream's whole chain on the target, archived and
// hot, and returns the number of its events.
func (mv *mover) verifyChain(ctx context.Context, stream journal.StreamID) (uint64, error) {
	sum, err := mv.dstJ.TagSummary(ctx, stream)
	if err != nil {
		return 0, err
	}
	archived, err := journal.VerifyArchive(ctx, mv.dstJ, stream, sum.Cut)
	if err != nil {
		return 0, verifyFailed(stream, err)
	}
	hot, err := journal.VerifyStream(ctx, mv.dstJ, stream)
	if err != nil {
		return 0, verifyFailed(stream, err)
	}
	return archived + hot, nil
}

// verifyFailed is a refusal for a broken chain on the target, the read
// error as it is otherwise.
func verifyFailed(stream journal.StreamID, err error) error {
	var chain *journal.ChainError
	if errors.As(err, &chain) {
		return refusedf("the copy of stream %s does not verify on the target (%v); inspect the source's chain with scribe verify", stream, err)
	}
	return fmt.Errorf("verifying stream %s on the target: %w", stream, err)
}

// switchOver marks the partition moved on the source (its Acquire then
// names the target) and lifts the target's fence. It holds the source's
// archiver and the partition's appends off (their advisory locks, in the
// order the archiver takes them, so they never wait for each other in a
// cycle; appends to other partitions go on) while it compares the source
// with the copy once more: a change sends the move back (changedSince).
func (mv *mover) switchOver(ctx context.Context) (MoveStep, error) {
	p := mv.m.Partition
	// From now on the target stops naming where the partition was served
	// (the source is about to say it moved here).
	if _, err := mv.m.Target.Exec(ctx, mv.dstSQL(`UPDATE __S__.partition_fences SET moved_to = '' WHERE partition = $1 AND state = 'incoming'`), p); err != nil {
		return "", err
	}
	tx, err := mv.m.Source.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := mv.lockSource(ctx, tx); err != nil {
		return "", err
	}
	if err := mv.at("switch: locked"); err != nil {
		return "", err
	}
	if back, err := mv.changedSince(ctx, tx); back != "" || err != nil {
		return back, err
	}
	ct, err := tx.Exec(ctx, mv.srcSQL(`UPDATE __S__.partition_fences SET state = 'moved', moved_to = $2, since = now()
		WHERE partition = $1 AND state IN ('outgoing', 'moved')`), p, mv.m.To)
	if err != nil {
		return "", err
	}
	if ct.RowsAffected() != 1 {
		return "", refusedf("the source's fence of partition %q is gone: it was removed by hand during the move; inspect the source", p)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", err
	}
	if err := mv.at("switch: source committed"); err != nil {
		return "", err
	}
	_, err = mv.m.Target.Exec(ctx, mv.dstSQL(`DELETE FROM __S__.partition_fences WHERE partition = $1 AND state = 'incoming'`), p)
	return MoveRetire, err
}

// lockSource takes, in tx on the source, the archiver's lock, then the
// partition's append lock, both exclusive.
func (mv *mover) lockSource(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1), pg_advisory_xact_lock($2)`,
		mv.srcS.LockKey(pgschema.LockArchive, "", "archive"), mv.srcS.LockKey(pgschema.LockPartition, mv.m.Partition, ""))
	return err
}

// retire deletes the source's copy of the partition (events, archived
// events, tag indexes, streams, snapshots) in one transaction under the
// locks of the switch; its 'moved' fence stays. A source that already
// retired it (a rerun) has nothing left; one that holds more events than
// the move copied got appends without a lease after the switch, and keeps
// everything (ErrMoveRefused).
func (mv *mover) retire(ctx context.Context) error {
	p := mv.m.Partition
	tx, err := mv.m.Source.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := mv.lockSource(ctx, tx); err != nil {
		return err
	}
	_, total, err := mv.digest(ctx, tx)
	switch {
	case err != nil:
		return err
	case total == 0:
		return nil // retired by an earlier run
	case total != mv.rec.copied:
		return refusedf("the source holds %d events of the partition after the switch and the move copied %d: appends without a lease reached it on the source after the switch, so the source keeps its copy; the events after position (%d, %d) are on the source only: append them to the target (same event IDs), delete them from the source, then run the same move again to retire the rest",
			total, mv.rec.copied, mv.rec.lastCommit, mv.rec.lastSeq)
	}
	for _, table := range []string{"event_tags", "events", "event_tags_archive", "events_archive", "streams", "snapshots"} {
		if _, err := tx.Exec(ctx, mv.srcSQL(`DELETE FROM __S__.`+table+` WHERE partition = $1`), p); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return mv.at("retire: source committed")
}
