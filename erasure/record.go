package erasure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/snapshots"
)

// RecordType is the type of the journal event that records an erasure. The
// event is untagged (it belongs to no stream), lives in the default
// partition, and its Data holds only the subject ID, who erased it and when
// (RecordData): no personal data. Runtimes, projections and publishers
// learn of erasures in feed order by subscribing to RecordQuery.
const RecordType = "scribe.SubjectErased"

// recordNamespace is the UUIDv5 namespace of erasure record IDs.
const recordNamespace = "0b7c8f5e-3a52-4d61-9a0e-5c1e6f2d7a41"

// RecordData is the JSON data of a RecordType event.
type RecordData struct {
	Subject  string    `json:"subject"`
	By       string    `json:"by"`
	ErasedAt time.Time `json:"erasedAt"`
}

// RecordID returns the event ID of subject's erasure record: a UUIDv5 of the
// subject, so that appending the record again is an idempotent duplicate.
func RecordID(subject string) uuid.UUID {
	return uuid.NewSHA1(uuid.MustParse(recordNamespace), []byte(subject))
}

// RecordEvent returns the journal event recording e. Its content depends
// only on e (the key store's original erasure), so every repeat of an
// erasure appends the same event and the journal answers it as a duplicate.
func RecordEvent(e Erasure) (journal.Event, error) {
	at := e.At.UTC().Truncate(time.Microsecond)
	data, err := json.Marshal(RecordData{Subject: e.Subject, By: e.By, ErasedAt: at})
	if err != nil {
		return journal.Event{}, fmt.Errorf("erasure: encoding the erasure record: %w", err)
	}
	return journal.Event{
		ID:            RecordID(e.Subject),
		Type:          RecordType,
		SchemaVersion: 1,
		Data:          data,
		Metadata:      journal.Metadata{Partition: journal.DefaultPartition, CreatedAt: at},
	}, nil
}

// RecordQuery is the query matching erasure records (in the default
// partition), for journal.Subscribe and Read.
func RecordQuery() journal.Query {
	return journal.Query{Partition: journal.DefaultPartition, Items: []journal.QueryItem{{Types: []string{RecordType}}}}
}

// ParseRecord returns the data of an erasure record, and false when rec is
// another event type.
func ParseRecord(rec *journal.Record) (RecordData, bool, error) {
	if rec.Type != RecordType {
		return RecordData{}, false, nil
	}
	var d RecordData
	if err := json.Unmarshal(rec.Data, &d); err != nil || d.Subject == "" {
		return RecordData{}, true, fmt.Errorf("%w: erasure record %s does not hold a subject", ErrCorrupt, rec.ID)
	}
	return d, true, nil
}

// EraseParams is what Erase needs.
type EraseParams struct {
	// Journal receives the erasure record. Required.
	Journal journal.Journal
	// KeyStore holds the subject's key. Required.
	KeyStore KeyStore
	// Snapshots, when set, loses every snapshot of the streams bound to the
	// subject (snapshots hold decoded state, that is plaintext, sealed
	// under the subject's key). Without it they stay, unreadable once the
	// key is destroyed. Optional.
	Snapshots snapshots.Store
	// Subject is the data subject to erase. Required.
	Subject string
	// By says who or what asked for the erasure (an operator, a ticket).
	// Required. It is stored in the key store and the journal: no personal
	// data.
	By string
}

// Erase erases a data subject without a running runtime (the `scribe erase`
// command uses it; runtime.Runtime.Erase calls it too). Each step is
// durable before the next begins:
//
//  1. KeyStore.BeginErasure records the erasure as pending, with who and
//     when: from here on no process gets the subject's key from the key
//     store, and every runtime drops what it holds of the subject within
//     its erasure poll interval;
//  2. the erasure record (RecordEvent, its ID derived from the subject) is
//     appended to the journal, so projections and publishers learn of it in
//     feed order; appending it again is an idempotent duplicate;
//  3. KeyStore.DestroyKey destroys the key: the subject's sealed fields are
//     unreadable for good;
//  4. the snapshots of the subject's bound streams are deleted (with
//     Snapshots);
//  5. KeyStore.CompleteErasure records the erasure as complete.
//
// A crash or failed call after step 1 leaves a pending erasure that
// CompletePending (which every runtime runs at start and periodically)
// finishes with steps 2–5; before step 1 nothing is visible. Erase is
// idempotent: a repeat returns the original erasure with Repeat set, and
// completes it if it is still pending. Errors say which step failed.
func Erase(ctx context.Context, p EraseParams) (Erasure, error) {
	if p.Journal == nil || p.KeyStore == nil {
		return Erasure{}, errors.New("erasure: Erase needs a Journal and a KeyStore")
	}
	look, err := p.KeyStore.Lookup(ctx, []string{p.Subject})
	if err != nil {
		return Erasure{}, fmt.Errorf("erasure: looking subject %q up before erasing it: %w", p.Subject, err)
	}
	_, hasKey := look.Keys[p.Subject]
	_, begun := look.Erased[p.Subject]
	e, err := p.KeyStore.BeginErasure(ctx, p.Subject, p.By)
	if err != nil {
		return Erasure{}, fmt.Errorf("erasure: beginning the erasure of subject %q: %w", p.Subject, err)
	}
	var done Erasure
	if e.State == ErasureComplete {
		done = e
		ev, rerr := RecordEvent(e)
		if rerr == nil {
			if rec, rerr := p.Journal.ReadEvent(ctx, ev.ID); rerr == nil {
				done.Position = rec.Position
			}
		}
	} else {
		done, err = complete(ctx, p.Journal, p.KeyStore, p.Snapshots, e)
		done.Repeat = e.Repeat
	}
	done.Known = hasKey || begun
	return done, err
}

// CompleteParams is what CompletePending needs.
type CompleteParams struct {
	// Journal receives the erasure records. Required.
	Journal journal.Journal
	// KeyStore holds the pending erasures. Required.
	KeyStore KeyStore
	// Snapshots, when set, loses the snapshots of the erased subjects'
	// streams (see EraseParams.Snapshots). Optional.
	Snapshots snapshots.Store
}

// CompletePending finishes every erasure the key store holds as pending
// (begun by an Erase that crashed or failed after its first step), with
// steps 2–5 of Erase, and returns the erasures it completed. It is safe to
// run concurrently with Erase and with other CompletePending calls, in any
// number of processes: every step is idempotent. On an error it goes on
// with the other erasures and returns the completed ones with the errors
// joined; the failed ones stay pending for the next call.
func CompletePending(ctx context.Context, p CompleteParams) ([]Erasure, error) {
	if p.Journal == nil || p.KeyStore == nil {
		return nil, errors.New("erasure: CompletePending needs a Journal and a KeyStore")
	}
	var done []Erasure
	var errs []error
	q := ErasureQuery{PendingOnly: true, Limit: 100}
	for {
		pending, err := p.KeyStore.Erasures(ctx, q)
		if err != nil {
			return done, errors.Join(append(errs, fmt.Errorf("erasure: listing pending erasures: %w", err))...)
		}
		for _, e := range pending {
			c, err := complete(ctx, p.Journal, p.KeyStore, p.Snapshots, e)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			done = append(done, c)
		}
		if len(pending) < q.Limit {
			return done, errors.Join(errs...)
		}
		q.After = pending[len(pending)-1].Sequence
	}
}

// complete runs steps 2–5 of Erase for the begun erasure e; the result
// carries the record's position.
func complete(ctx context.Context, j journal.Journal, ks KeyStore, snaps snapshots.Store, e Erasure) (Erasure, error) {
	pos, err := appendRecord(ctx, j, e)
	if err != nil {
		return e, fmt.Errorf("erasure: the erasure of subject %q is pending (its key is refused everywhere), but appending its erasure record failed; it completes at the next sweep of a runtime, or erase again: %w", e.Subject, err)
	}
	done, err := finish(ctx, ks, snaps, e)
	done.Position = pos
	return done, err
}

// appendRecord appends e's erasure record (step 2). A record of the subject
// already in the journal with other content (an erasure re-applied to a
// restored key store by ReapplyRecorded carries a new time) counts as
// appended: the journal records the subject's erasure either way.
func appendRecord(ctx context.Context, j journal.Journal, e Erasure) (journal.Position, error) {
	ev, err := RecordEvent(e)
	if err != nil {
		return journal.Position{}, err
	}
	res, err := j.Append(ctx, []journal.Event{ev}, journal.AppendOptions{})
	if err == nil {
		return res.Records[0].Position, nil
	}
	if !errors.Is(err, journal.ErrDuplicateMismatch) {
		return journal.Position{}, err
	}
	rec, rerr := j.ReadEvent(ctx, ev.ID)
	if rerr != nil {
		return journal.Position{}, errors.Join(err, rerr)
	}
	if d, ok, perr := ParseRecord(&rec); perr != nil || !ok || d.Subject != e.Subject {
		return journal.Position{}, err
	}
	return rec.Position, nil
}

// finish runs steps 3–5 of Erase for the begun erasure e, whose record is
// in the journal.
func finish(ctx context.Context, ks KeyStore, snaps snapshots.Store, e Erasure) (Erasure, error) {
	destroyed, err := ks.DestroyKey(ctx, e.Subject)
	if err != nil {
		return e, fmt.Errorf("erasure: the erasure of subject %q is pending (recorded in the journal), but destroying its key failed; it completes at the next sweep of a runtime, or erase again: %w", e.Subject, err)
	}
	e = destroyed
	if snaps != nil {
		if err := DropSnapshots(ctx, ks, snaps, e.Subject); err != nil {
			return e, err
		}
	}
	completed, err := ks.CompleteErasure(ctx, e.Subject)
	if err != nil {
		return e, fmt.Errorf("erasure: the erasure of subject %q is pending (key destroyed, snapshots deleted), but recording its completion failed; it completes at the next sweep of a runtime, or erase again: %w", e.Subject, err)
	}
	return completed, nil
}

// DropSnapshots deletes every snapshot of the streams bound to subject.
// It uses snapshots.Store.Prune with keep 0, which every store offers: one
// way to delete a stream's snapshots, not two.
func DropSnapshots(ctx context.Context, ks KeyStore, st snapshots.Store, subject string) error {
	streams, err := ks.Streams(ctx, subject)
	if err != nil {
		return fmt.Errorf("erasure: listing the streams of subject %q: %w", subject, err)
	}
	for _, s := range streams {
		if _, err := st.Prune(ctx, s, 0); err != nil {
			return fmt.Errorf("erasure: the erasure of subject %q is pending (key destroyed), but deleting the snapshots of stream %s failed; it completes at the next sweep of a runtime, or erase again: %w", subject, s, err)
		}
	}
	return nil
}
