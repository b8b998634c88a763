package evidence_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/evidence"
	"github.com/scribe-es/scribe/journal"
)

// TestProofs: every event of every chain has a proof that verifies offline
// through its JSON form, with a path of log size; a rewritten event's
// proof, a doctored proof and a wrong key do not hold.
func TestProofs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := f.make(t, f.j)
	for _, r := range f.recs {
		for _, l := range r.Links {
			p, err := evidence.Prove(c, r, l.Tag)
			require.NoError(t, err)
			b, err := json.Marshal(p)
			require.NoError(t, err)
			var back evidence.Proof
			require.NoError(t, json.Unmarshal(b, &back))
			got, err := back.Verify(f.pub)
			require.NoError(t, err, "%s in %s", r.ID, l.Tag)
			require.Equal(t, r.ID, got.Record.ID)
			require.Equal(t, r.Type, got.Record.Type)
			require.JSONEq(t, string(r.Data), string(got.Record.Data))
			require.Equal(t, l.Version, got.Version)
			require.Equal(t, l.Hash, got.Hash)
			require.Equal(t, r.RecordedAt, got.Record.RecordedAt)
			require.LessOrEqual(t, len(p.EventPath.Hashes), 3, "log2 of 6 events, rounded up")
		}
	}

	r := f.nth("account:a", 4)
	p, err := evidence.Prove(c, r, "")
	require.NoError(t, err)

	other, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	_, err = p.Verify(other)
	require.ErrorIs(t, err, evidence.ErrWrongKey)

	doctor := func(edit func(p *evidence.Proof)) error {
		b, _ := json.Marshal(p)
		var q evidence.Proof
		require.NoError(t, json.Unmarshal(b, &q))
		edit(&q)
		_, err := q.Verify(f.pub)
		return err
	}
	require.ErrorIs(t, doctor(func(q *evidence.Proof) { q.Event.Canonical[len(q.Event.Canonical)-20] ^= 1 }), evidence.ErrProof)
	require.ErrorIs(t, doctor(func(q *evidence.Proof) { q.Event.Version, q.EventPath.Index = 3, 2 }), evidence.ErrProof)
	require.ErrorIs(t, doctor(func(q *evidence.Proof) { q.EventPath.Hashes[0][0] ^= 1 }), evidence.ErrProof)
	require.ErrorIs(t, doctor(func(q *evidence.Proof) { q.StreamPath.Hashes[0][0] ^= 1 }), evidence.ErrProof)
	require.ErrorIs(t, doctor(func(q *evidence.Proof) { q.Stream.Version++ }), evidence.ErrProof)
	require.ErrorIs(t, doctor(func(q *evidence.Proof) { q.Checkpoint.Root[0] ^= 1 }), evidence.ErrProof)
	require.ErrorIs(t, doctor(func(q *evidence.Proof) { q.Checkpoint.Events++ }), evidence.ErrBadSignature)
	require.ErrorIs(t, doctor(func(q *evidence.Proof) { q.Format = "scribe.proof.v0" }), evidence.ErrFormat)

	// The event as a consistent rewrite left it: its proof does not hold
	// against the checkpoint made before.
	rw := &rewritten{Journal: f.j, stream: journal.Stream("account:a"), at: 2, data: json.RawMessage(`{"n":999}`)}
	for rec, err := range rw.ReadStream(t.Context(), rw.stream, 4, 1) {
		require.NoError(t, err)
		p, err := evidence.Prove(c, rec, "account:a")
		require.NoError(t, err)
		_, err = p.Verify(f.pub)
		require.ErrorIs(t, err, evidence.ErrProof)
		require.ErrorContains(t, err, "differs from the one checkpointed")
	}

	// An event newer than the checkpoint is not covered.
	res, err := f.j.Append(t.Context(), []journal.Event{{ID: journal.NewEventID(), Type: "Deposited", Tags: []journal.Tag{"account:a"}, Data: json.RawMessage(`{}`)}}, journal.AppendOptions{})
	require.NoError(t, err)
	_, err = evidence.Prove(c, res.Records[0], "")
	require.ErrorIs(t, err, evidence.ErrNotCovered)
}

// TestParseCanonical: every field survives the canonical encoding.
func TestParseCanonical(t *testing.T) {
	t.Parallel()
	r := journal.Record{Event: journal.Event{ID: journal.NewEventID(), Type: "T", SchemaVersion: -3, Tags: []journal.Tag{"a:1", "b:2"},
		Data: json.RawMessage(`{"x":"<&>"}`), Metadata: journal.Metadata{CorrelationID: "c", CausationID: "ca", UserID: "u", IdempotencyKey: "k",
			Scopes: []string{"s1", "s2"}, Partition: "p", CreatedAt: time.UnixMicro(1234567).UTC(), TraceParent: "tp", TraceState: "ts", CommandHash: "h"}},
		RecordedAt: time.UnixMicro(7654321).UTC()}
	for _, rec := range []journal.Record{r, {Event: journal.Event{ID: r.ID, Type: "U", Data: json.RawMessage(`{}`)}}} {
		b := journal.CanonicalBytes(&rec)
		got, err := evidence.ParseCanonical(b)
		require.NoError(t, err)
		require.Equal(t, b, journal.CanonicalBytes(&got))
		require.Equal(t, rec.Type, got.Type)
		require.Equal(t, rec.Metadata.CommandHash, got.Metadata.CommandHash)
		_, err = evidence.ParseCanonical(b[:len(b)-1])
		require.Error(t, err)
		_, err = evidence.ParseCanonical(append(b, 0))
		require.Error(t, err)
	}
}
