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
	// subject (snapshots hold decoded state, that is plaintext). Optional.
	Snapshots snapshots.Store
	// Subject is the data subject to erase. Required.
	Subject string
	// By says who or what asked for the erasure (an operator, a ticket).
	// Required. It is stored in the key store and the journal: no personal
	// data.
	By string
}

// Erase erases a data subject without a running runtime (the `scribe erase`
// command uses it; runtime.Runtime.Erase calls it too):
//
//  1. the key store destroys the subject's key and records the erasure
//     (KeyStore.Erase) — from here on, the subject's sealed fields are
//     unreadable everywhere;
//  2. the erasure record (RecordEvent) is appended to the journal, so every
//     runtime, projection and publisher learns of it in feed order;
//  3. the snapshots of the subject's bound streams are deleted.
//
// Erase is idempotent: a repeat returns the original erasure with Repeat
// set and redoes steps 2 and 3, so a call that failed midway is completed
// by calling it again. Errors say which step failed; every step is safe to
// retry.
func Erase(ctx context.Context, p EraseParams) (Erasure, error) {
	if p.Journal == nil || p.KeyStore == nil {
		return Erasure{}, errors.New("erasure: Erase needs a Journal and a KeyStore")
	}
	e, err := p.KeyStore.Erase(ctx, p.Subject, p.By)
	if err != nil {
		return Erasure{}, fmt.Errorf("erasure: destroying the key of subject %q: %w", p.Subject, err)
	}
	ev, err := RecordEvent(e)
	if err != nil {
		return e, err
	}
	if _, err := p.Journal.Append(ctx, []journal.Event{ev}, journal.AppendOptions{}); err != nil {
		return e, fmt.Errorf("erasure: the key of subject %q is destroyed, but appending the erasure record failed (running runtimes have not dropped their state yet); erase again to complete it: %w", p.Subject, err)
	}
	if p.Snapshots != nil {
		if err := DropSnapshots(ctx, p.KeyStore, p.Snapshots, p.Subject); err != nil {
			return e, err
		}
	}
	return e, nil
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
			return fmt.Errorf("erasure: deleting the snapshots of stream %s (subject %q); erase again to complete it: %w", s, subject, err)
		}
	}
	return nil
}
