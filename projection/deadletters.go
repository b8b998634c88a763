package projection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scribe-es/scribe/journal"
)

// DeadLetterReplayer is the optional capability of a Store to replay dead
// letters; the memory and Postgres stores have it. Find it with a type
// assertion (ReplayDeadLetters does). Its methods are safe for concurrent
// use, also by several processes sharing a database.
type DeadLetterReplayer[Tx any] interface {
	// ReplayDeadLetter runs apply for k's dead letter at pos in a
	// transaction that also deletes the letter when apply returns nil, so a
	// read model written in tx gets the event exactly once. The letter is
	// locked meanwhile: a concurrent replay of it waits, then finds it gone
	// (ErrNoDeadLetter) or, if the first failed, replays it. When apply
	// fails its writes are rolled back and the letter is kept with apply's
	// error, Attempts one higher and its request cleared; the call returns
	// a *HandlerError. A letter whose event is gone is kept and reported.
	ReplayDeadLetter(ctx context.Context, k Key, pos journal.Position, apply func(ctx context.Context, tx Tx, d DeadLetter) error) error
	// RequestReplay marks every dead letter of k for replay by a runner of
	// k (see Projection.Replay) and returns how many it marked. It runs no
	// handler: a process that cannot run the projection's code (the scribe
	// command) asks the running runner to replay.
	RequestReplay(ctx context.Context, k Key) (int, error)
	// ReplayRequests returns up to limit of k's dead letters marked for
	// replay, in position order.
	ReplayRequests(ctx context.Context, k Key, limit int) ([]DeadLetter, error)
}

// ErrNoDeadLetter: the dead letter to replay does not exist (another
// replay removed it, or the projection was reset). Nothing was applied.
var ErrNoDeadLetter = errors.New("projection: no such dead letter (replayed or removed meanwhile); nothing was applied")

// ReplayReport says what ReplayDeadLetters did.
type ReplayReport struct {
	// Replayed counts the letters applied and removed.
	Replayed int
	// Failed are the letters whose replay failed again, as now stored: kept,
	// with the new error and Attempts one higher, in position order.
	Failed []DeadLetter
}

// ReplayDeadLetters re-runs apply for each of k's dead letters, in position
// order, each in its own transaction of store
// (DeadLetterReplayer.ReplayDeadLetter, which store must implement): a
// letter is removed with apply's writes, or kept with the new error and
// listed in the report. Replays run beside the projection's runner, so
// apply must accept an old event after newer ones. It stops at the first
// store error and returns the report so far with it.
func ReplayDeadLetters[Tx any](ctx context.Context, store Store[Tx], k Key, apply func(ctx context.Context, tx Tx, d DeadLetter) error) (ReplayReport, error) {
	var rep ReplayReport
	if err := k.Validate(); err != nil {
		return rep, err
	}
	if apply == nil {
		return rep, fmt.Errorf("projection %s: ReplayDeadLetters: apply is nil; give the function that re-applies a dead letter", k)
	}
	rp, ok := store.(DeadLetterReplayer[Tx])
	if !ok {
		return rep, fmt.Errorf("projection %s: the store %T cannot replay dead letters (it does not implement projection.DeadLetterReplayer)", k, store)
	}
	letters, err := store.DeadLetters(ctx, k)
	if err != nil {
		return rep, err
	}
	err = replay(ctx, rp, k, letters, apply, func(d DeadLetter, herr *HandlerError) {
		if herr == nil {
			rep.Replayed++
			return
		}
		d.Error, d.Attempts, d.ReplayRequestedAt = herr.Err.Error(), d.Attempts+1, time.Time{}
		rep.Failed = append(rep.Failed, d)
	})
	return rep, err
}

// replay replays letters in order (DeadLetterReplayer.ReplayDeadLetter)
// and tells done of each replayed (herr nil) or failed again; it skips the
// letters removed meanwhile and stops at the first store error.
func replay[Tx any](ctx context.Context, rp DeadLetterReplayer[Tx], k Key, letters []DeadLetter, apply func(ctx context.Context, tx Tx, d DeadLetter) error, done func(d DeadLetter, herr *HandlerError)) error {
	for _, d := range letters {
		err := rp.ReplayDeadLetter(ctx, k, d.Record.Position, apply)
		var herr *HandlerError
		if err != nil && !errors.Is(err, ErrNoDeadLetter) && !errors.As(err, &herr) {
			return err
		}
		if err == nil || herr != nil {
			done(d, herr)
		}
	}
	return nil
}
