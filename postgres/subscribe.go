package postgres

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/internal/backoff"
	"github.com/scribe-es/scribe/journal"
)

// Subscriptions (the package documentation's summary, in full).
//
// Subscribe reads page by page (gated), then waits for a wake-up. After
// appends commit, a notifier goroutine wakes this journal's subscribers and
// sends one pg_notify, at most every 5ms (coalesced), in its own transaction
// with synchronous_commit off: NOTIFY inside the append would serialize
// commits through Postgres's notify lock and defeat group commit. One LISTEN
// connection per Journal fans notifications from other processes out to all
// subscribers. A lost notification costs at most PollInterval; the
// notifications are only wake-ups, never the data.

// broadcaster wakes every waiter at once: wait returns a channel that is
// closed by the next notify.
type broadcaster struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcaster() *broadcaster { return &broadcaster{ch: make(chan struct{})} }

func (b *broadcaster) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcaster) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.ch)
	b.ch = make(chan struct{})
}

// committed asks the notifier to wake this journal's subscribers and tell
// other processes that an append committed. NOTIFY is not sent inside the
// append's transaction: Postgres serializes the commits of notifying
// transactions (a global lock held through the WAL flush), which would undo
// group commit.
func (j *Journal) committed() {
	j.notifyOnce.Do(j.startNotifier)
	select {
	case j.notifyCh <- struct{}{}:
	default: // a notification is already pending: coalesced
	}
}

// notifyGap is the least time between two wake-ups (local, and NOTIFY) of one
// Journal: commits in between are coalesced into the next one, so a busy
// journal sends at most 1/notifyGap notification transactions per second and
// its subscribers read at most that often while caught up.
const notifyGap = 5 * time.Millisecond

// startNotifier starts the goroutine that sends one NOTIFY per burst of
// commits, in its own short transaction with synchronous_commit off (a lost
// notification costs subscribers at most PollInterval).
func (j *Journal) startNotifier() {
	j.notifyCh = make(chan struct{}, 1)
	j.wg.Add(1)
	go j.notifier(j.notifyCh, j.channel, j.wake)
}

// leasesChanged wakes the Acquires waiting in this process at once and asks
// the lease notifier to tell other processes that a lease may have become
// free (a release, a closed or superseded node session).
func (j *Journal) leasesChanged() {
	j.leaseWake.notify()
	j.leaseNotifyOnce.Do(func() {
		j.leaseNotifyCh = make(chan struct{}, 1)
		j.wg.Add(1)
		go j.notifier(j.leaseNotifyCh, j.leaseChannel, nil)
	})
	select {
	case j.leaseNotifyCh <- struct{}{}:
	default: // a notification is already pending: coalesced
	}
}

// notifier sends one NOTIFY on channel per burst of signals on ch, at most
// every notifyGap, after waking local (when not nil).
func (j *Journal) notifier(ch <-chan struct{}, channel string, local *broadcaster) {
	defer j.wg.Done()
	gap := time.NewTimer(0)
	defer gap.Stop()
	for {
		select {
		case <-j.closed:
			return
		case <-ch:
		}
		select { // coalesce: wait out the gap since the last NOTIFY
		case <-j.closed:
			return
		case <-gap.C:
		}
		gap.Reset(notifyGap)
		if local != nil {
			local.notify()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue("SET LOCAL synchronous_commit = off")
		b.Queue("SELECT pg_notify($1, '')", channel)
		b.Queue("COMMIT")
		_ = j.pool.SendBatch(ctx, b).Close()
		cancel()
	}
}

// startListener starts, once, the goroutine that LISTENs on the journal's
// channels on a dedicated connection and wakes subscribers (commits) or
// waiting Acquires (lease changes) on every notification. It reconnects after
// failures; subscribers and Acquires poll meanwhile.
func (j *Journal) startListener() {
	j.listenOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		j.wg.Add(2)
		go func() {
			defer j.wg.Done()
			<-j.closed
			cancel()
		}()
		go func() {
			defer j.wg.Done()
			j.listen(ctx)
		}()
	})
}

func (j *Journal) listen(ctx context.Context) {
	retry := backoff.Backoff{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	for ctx.Err() == nil {
		err := j.listenOnceConn(ctx)
		if ctx.Err() != nil {
			return
		}
		_ = err // the connection failed: subscribers keep polling; reconnect.
		j.wake.notify()
		j.leaseWake.notify()
		if !retry.Wait(ctx) {
			return
		}
	}
}

func (j *Journal) listenOnceConn(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, j.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{j.channel}.Sanitize()+"; LISTEN "+pgx.Identifier{j.leaseChannel}.Sanitize()); err != nil {
		return err
	}
	// Events committed and leases freed before LISTEN took effect are found
	// by the subscribers' next read and the Acquires' next attempt.
	j.wake.notify()
	j.leaseWake.notify()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == j.leaseChannel {
			j.leaseWake.notify()
		} else {
			j.wake.notify()
		}
	}
}

// Subscribe yields the records matching q after position after: catch-up
// page by page, then live, woken by NOTIFY (or after PollInterval), every
// read gated like ReadAll. A subscription to one partition ends with an error
// matching journal.ErrPartitionMoved when the partition moved to another
// database (after reading all this one held of it), or moved away and back
// since its position: resume after the last record processed, found by its
// event ID (partitioned.Router.FollowPartition does).
func (j *Journal) Subscribe(ctx context.Context, q journal.Query, after journal.Position) iter.Seq2[journal.Record, error] {
	return j.SubscribeAnchored(ctx, q, after, uuid.Nil)
}

// SubscribeAnchored is Subscribe from the record with event ID afterID at
// position after (uuid.Nil: the event found there at the first read); when
// that event is no longer there, it ends with journal.ErrPartitionMoved. The
// partitioned router's anchored subscriptions use it.
func (j *Journal) SubscribeAnchored(ctx context.Context, q journal.Query, after journal.Position, afterID uuid.UUID) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		if err := q.Validate(); err != nil {
			yield(journal.Record{}, err)
			return
		}
		if err := j.checkOpen(); err != nil {
			yield(journal.Record{}, err)
			return
		}
		var g *partitionGuard
		if !q.AllPartitions {
			g = &partitionGuard{partition: q.PartitionOrDefault(), anchor: afterID}
		}
		j.follow(ctx, after, g, func(after journal.Position) ([]journal.Record, bool, error) {
			page, err := j.readPage(ctx, "subscribe", q, bound{op: ">", pos: after}, false, j.cfg.PageSize, nil)
			return page, len(page) == j.cfg.PageSize, err
		}, yield)
	}
}

// partitionGuard is what a subscription to one partition checks after each
// page it reads and before yielding it (checkPartition): that the
// partition has not moved away for good, and that the record it reads
// after (the anchor) is still where it was. A move deletes the source's
// copy of a partition in one transaction, before the partition can come
// back, and positions are never reused: so an anchor still at its position
// after a page was read proves the page belongs to the same copy of the
// partition as the anchor.
type partitionGuard struct {
	partition string
	// anchor is the event ID of the record at the subscription's position;
	// uuid.Nil until known.
	anchor uuid.UUID
}

// partitionGuardSQL returns the event ID at position ($2, $3) of partition
// $1 (NULL when gone), whether event $4 is anywhere in the partition, and
// the partition's move fence (NULLs when none).
const partitionGuardSQL = `SELECT
	(SELECT id FROM __S__.events WHERE commit_xid = $2 AND seq = $3 AND partition = $1),
	EXISTS (SELECT FROM __S__.events WHERE id = $4 AND partition = $1),
	f.state, f.moved_to
FROM (SELECT 1) one LEFT JOIN __S__.partition_fences f ON f.partition = $1`

// checkPartition returns the *journal.PartitionMoveError that ends a
// subscription of g's partition whose page after after came back empty
// (empty) or not: the partition moved out (when caught up, or when the
// anchor is gone), is moving in again (anchor gone: retryable), or its
// anchor is here at another position (it moved away and back). An anchor
// gone otherwise (retention deleted it) changes nothing.
func (j *Journal) checkPartition(ctx context.Context, g *partitionGuard, after journal.Position, empty bool) error {
	var at *uuid.UUID
	var elsewhere bool
	var state, to *string
	if err := j.pool.QueryRow(ctx, j.sql(partitionGuardSQL), g.partition, i64(after.Commit), i64(after.Seq), g.anchor).Scan(&at, &elsewhere, &state, &to); err != nil {
		return j.translate("subscribe: partition check", err)
	}
	fence, movedTo := "", "another database"
	if state != nil {
		fence = *state
	}
	if to != nil && *to != "" {
		movedTo = *to
	}
	switch {
	case fence == "moved" && empty:
		return &journal.PartitionMoveError{Partition: g.partition, To: movedTo, Moved: true}
	case after.IsZero():
		return nil
	case at != nil:
		if g.anchor == uuid.Nil {
			g.anchor = *at
		}
		return nil
	case fence == "moved":
		return &journal.PartitionMoveError{Partition: g.partition, To: movedTo, Moved: true}
	case fence == "incoming":
		return &journal.PartitionMoveError{Partition: g.partition, To: "this database"}
	case elsewhere:
		return &journal.PartitionMoveError{Partition: g.partition, To: "this database again (it moved away and back since the subscription's position)", Moved: true}
	}
	return nil
}

// follow yields the pages that read returns, each read after the last
// record yielded (after at first), until ctx ends, the journal closes or
// yield stops: at once while read reports that more may follow, else when an
// append wakes the journal or after PollInterval. It is the loop of every
// subscription. With a guard (a subscription to one partition) each page
// is checked (checkPartition) before it is yielded.
func (j *Journal) follow(ctx context.Context, after journal.Position, g *partitionGuard, read func(after journal.Position) ([]journal.Record, bool, error), yield func(journal.Record, error) bool) {
	// Notifications come from the primary: a standby delivers none. A
	// replica may not have replayed what a notification announces, so
	// after one it reads again soon, backing off (1 ms, doubling, up to
	// PollInterval) while it finds nothing new.
	src := j.primary()
	src.startListener()
	timer := time.NewTimer(j.cfg.PollInterval)
	defer timer.Stop()
	var retry time.Duration // a replica's next quick re-read; 0: none
	for {
		wake := src.wake.wait()
		page, more, err := read(after)
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			yield(journal.Record{}, err)
			return
		}
		if g != nil && (len(page) == 0 || !after.IsZero()) {
			if err := j.checkPartition(ctx, g, after, len(page) == 0); err != nil {
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(journal.Record{}, err)
				return
			}
		}
		for i := range page {
			if !yield(page[i], nil) {
				return
			}
			after = page[i].Position
			if g != nil {
				g.anchor = page[i].ID
			}
		}
		if more {
			continue
		}
		wait := j.cfg.PollInterval
		if retry > 0 {
			if len(page) > 0 {
				retry = time.Millisecond
			}
			wait, retry = retry, 2*retry
			if retry >= j.cfg.PollInterval {
				retry = 0
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			yield(journal.Record{}, ctx.Err())
			return
		case <-j.closed:
			yield(journal.Record{}, fmt.Errorf("%w: the journal was closed while subscribed", journal.ErrStoreNotOpen))
			return
		case <-wake:
			if j.replica != nil {
				retry = time.Millisecond
			}
		case <-timer.C:
		}
	}
}
