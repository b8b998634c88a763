package journal_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"iter"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/backend"
)

func sampleRecord() journal.Record {
	return journal.Record{
		Event: journal.Event{
			ID:            uuid.MustParse("0190b3a4-5c6d-7e8f-9a0b-1c2d3e4f5a6b"),
			Type:          "Deposited",
			SchemaVersion: 3,
			Tags:          []journal.Tag{"account:42", "branch:7"},
			Data:          json.RawMessage(`{"amount":10}`),
			Metadata: journal.Metadata{
				CorrelationID:  "corr",
				CausationID:    "cause",
				UserID:         "ada",
				IdempotencyKey: "idem",
				Scopes:         []string{"s1", "s2"},
				Partition:      "tenant",
				CreatedAt:      time.Date(2026, 5, 6, 7, 8, 9, 123456000, time.UTC),
				TraceParent:    "00-aa-bb-01",
				TraceState:     "k=v",
			},
		},
		RecordedAt: time.Date(2026, 5, 6, 7, 8, 10, 654321000, time.UTC),
	}
}

// TestCanonicalBytesLayout builds the documented encoding by hand.
func TestCanonicalBytesLayout(t *testing.T) {
	t.Parallel()
	r := sampleRecord()
	var want []byte
	u64 := func(v uint64) { want = binary.BigEndian.AppendUint64(want, v) }
	str := func(s string) { u64(uint64(len(s))); want = append(want, s...) }
	tm := func(ts time.Time) { want = append(want, 1); u64(uint64(ts.UnixMicro())) }
	str("scribe.event.v1")
	want = append(want, r.ID[:]...)
	str("Deposited")
	u64(3)
	u64(2)
	str("account:42")
	str("branch:7")
	str(`{"amount":10}`)
	str("corr")
	str("cause")
	str("ada")
	str("idem")
	u64(2)
	str("s1")
	str("s2")
	str("tenant")
	tm(r.Metadata.CreatedAt)
	str("00-aa-bb-01")
	str("k=v")
	tm(r.RecordedAt)
	require.Equal(t, want, journal.CanonicalBytes(&r))
}

func TestCanonicalBytesNormalizesTimeAndPartition(t *testing.T) {
	t.Parallel()
	a := sampleRecord()
	b := sampleRecord()
	b.RecordedAt = b.RecordedAt.In(time.FixedZone("Y", -5*3600)).Add(999 * time.Nanosecond)
	b.Metadata.CreatedAt = b.Metadata.CreatedAt.In(time.FixedZone("Z", 3600))
	require.Equal(t, journal.CanonicalBytes(&a), journal.CanonicalBytes(&b))

	a.Metadata.Partition = ""
	b.Metadata.Partition = journal.DefaultPartition
	require.Equal(t, journal.CanonicalBytes(&a), journal.CanonicalBytes(&b))

	// A zero CreatedAt encodes differently from any real instant.
	a.Metadata.CreatedAt = time.Time{}
	require.NotEqual(t, journal.CanonicalBytes(&a), journal.CanonicalBytes(&b))
}

func TestCanonicalBytesCoversEveryField(t *testing.T) {
	t.Parallel()
	base := journal.CanonicalBytes(ptr(sampleRecord()))
	muts := map[string]func(*journal.Record){
		"id":          func(r *journal.Record) { r.ID[15]++ },
		"type":        func(r *journal.Record) { r.Type = "Withdrawn" },
		"schema":      func(r *journal.Record) { r.SchemaVersion = 4 },
		"tags":        func(r *journal.Record) { r.Tags = r.Tags[:1] },
		"data":        func(r *journal.Record) { r.Data = json.RawMessage(`{"amount":11}`) },
		"correlation": func(r *journal.Record) { r.Metadata.CorrelationID = "x" },
		"causation":   func(r *journal.Record) { r.Metadata.CausationID = "x" },
		"user":        func(r *journal.Record) { r.Metadata.UserID = "x" },
		"idempotency": func(r *journal.Record) { r.Metadata.IdempotencyKey = "x" },
		"scopes":      func(r *journal.Record) { r.Metadata.Scopes = []string{"s2", "s1"} },
		"partition":   func(r *journal.Record) { r.Metadata.Partition = "other" },
		"created":     func(r *journal.Record) { r.Metadata.CreatedAt = r.Metadata.CreatedAt.Add(time.Microsecond) },
		"traceparent": func(r *journal.Record) { r.Metadata.TraceParent = "x" },
		"tracestate":  func(r *journal.Record) { r.Metadata.TraceState = "x" },
		"recorded":    func(r *journal.Record) { r.RecordedAt = r.RecordedAt.Add(time.Microsecond) },
		// Moving bytes between adjacent fields must change the encoding.
		"shift type/tag": func(r *journal.Record) { r.Type = "Deposited" + "a"; r.Tags = []journal.Tag{"ccount:42", "branch:7"} },
		"shift tags":     func(r *journal.Record) { r.Tags = []journal.Tag{"account:42branch:7"} },
		"shift scopes":   func(r *journal.Record) { r.Metadata.Scopes = []string{"s1s2"} },
	}
	for name, mut := range muts {
		r := sampleRecord()
		mut(&r)
		require.NotEqual(t, base, journal.CanonicalBytes(&r), name)
	}
	// Position and links are not covered.
	r := sampleRecord()
	r.Position = journal.Position{Commit: 9, Seq: 9}
	r.Links = []journal.StreamLink{{Tag: "account:42", Version: 5}}
	require.Equal(t, base, journal.CanonicalBytes(&r))
}

func ptr[T any](v T) *T { return &v }

func TestChainHash(t *testing.T) {
	t.Parallel()
	prev := journal.Hash(sha256.Sum256([]byte("prev")))
	canonical := []byte("canonical bytes")
	want := sha256.Sum256(append(append([]byte(nil), prev[:]...), canonical...))
	require.Equal(t, journal.Hash(want), journal.ChainHash(prev, canonical))
	require.NotEqual(t, journal.ChainHash(journal.Hash{}, canonical), journal.ChainHash(prev, canonical))
	require.Len(t, journal.ChainHash(prev, nil).String(), 64)
}

func TestLinkRecord(t *testing.T) {
	t.Parallel()
	r := sampleRecord()
	headB := journal.Hash(sha256.Sum256([]byte("b")))
	heads := map[journal.Tag]struct {
		v uint64
		h journal.Hash
	}{"branch:7": {4, headB}}
	var asked []journal.Tag
	backend.LinkRecord(&r, func(tag journal.Tag) (uint64, journal.Hash) {
		asked = append(asked, tag)
		h := heads[tag]
		return h.v, h.h
	})
	require.Equal(t, []journal.Tag{"account:42", "branch:7"}, asked)
	require.Len(t, r.Links, 2)
	canonical := journal.CanonicalBytes(&r)
	require.Equal(t, journal.StreamLink{Tag: "account:42", Version: 1, Hash: journal.ChainHash(journal.Hash{}, canonical)}, r.Links[0])
	require.Equal(t, journal.StreamLink{Tag: "branch:7", Version: 5, PrevHash: headB, Hash: journal.ChainHash(headB, canonical)}, r.Links[1])
	require.Equal(t, uint64(5), r.Version("branch:7"))

	// An untagged record is linked into its type's untagged chain.
	untagged := sampleRecord()
	untagged.Tags = nil
	chainHead := journal.ChainHash(journal.Hash{}, []byte("earlier"))
	asked = nil
	backend.LinkRecord(&untagged, func(tag journal.Tag) (uint64, journal.Hash) {
		asked = append(asked, tag)
		return 9, chainHead
	})
	require.Equal(t, []journal.Tag{journal.UntaggedChain(untagged.Type)}, asked)
	require.Equal(t, []journal.StreamLink{{Tag: journal.UntaggedChain(untagged.Type), Version: 10, PrevHash: chainHead,
		Hash: journal.ChainHash(chainHead, journal.CanonicalBytes(&untagged))}}, untagged.Links)
	require.Empty(t, untagged.Tags, "the chain's tag is a link, not a tag of the event")
}

// streamReader serves ReadStream from a fixed slice; VerifyStream needs nothing else.
type streamReader struct {
	journal.Reader
	records []journal.Record
	failAt  int // yield an error instead of the record at this index (-1: never)
}

func (s streamReader) ReadStream(ctx context.Context, _ journal.StreamID, from uint64, _ int) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		for i, r := range s.records {
			if i == s.failAt {
				yield(journal.Record{}, errors.New("disk on fire"))
				return
			}
			if !yield(r, nil) {
				return
			}
		}
	}
}

func chain(n int) []journal.Record {
	var (
		out  []journal.Record
		head journal.Hash
	)
	for i := range n {
		r := sampleRecord()
		r.ID = uuid.New()
		r.Data = json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)
		r.Metadata.Partition = journal.DefaultPartition
		r.Position = journal.Position{Commit: uint64(i + 1), Seq: uint64(i + 1)}
		backend.LinkRecord(&r, func(tag journal.Tag) (uint64, journal.Hash) {
			if tag == "account:42" {
				return uint64(i), head
			}
			return 0, journal.Hash{}
		})
		head = r.Links[0].Hash
		out = append(out, r)
	}
	return out
}

func TestVerifyStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stream := journal.StreamID{Tag: "account:42"}

	n, err := journal.VerifyStream(ctx, streamReader{records: chain(4), failAt: -1}, stream)
	require.NoError(t, err)
	require.Equal(t, uint64(4), n)

	n, err = journal.VerifyStream(ctx, streamReader{failAt: -1}, stream)
	require.NoError(t, err)
	require.Zero(t, n)

	broken := func(t *testing.T, recs []journal.Record, wantVerified, wantVersion uint64, reason string) {
		t.Helper()
		n, err := journal.VerifyStream(ctx, streamReader{records: recs, failAt: -1}, stream)
		require.Equal(t, wantVerified, n)
		var ce *journal.ChainError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, wantVersion, ce.Version)
		require.Equal(t, stream.Normalize(), ce.Stream)
		require.Equal(t, recs[wantVerified].Position, ce.Position)
		require.Contains(t, ce.Reason, reason)
	}

	t.Run("tampered data", func(t *testing.T) {
		recs := chain(4)
		recs[2].Data = json.RawMessage(`{"i":99}`)
		broken(t, recs, 2, 3, "altered")
	})
	t.Run("tampered metadata", func(t *testing.T) {
		recs := chain(3)
		recs[0].Metadata.UserID = "mallory"
		broken(t, recs, 0, 1, "altered")
	})
	t.Run("gap", func(t *testing.T) {
		recs := chain(4)
		recs = append(recs[:1], recs[2:]...)
		broken(t, recs, 1, 3, "expected version 2")
	})
	t.Run("rewritten prev hash", func(t *testing.T) {
		recs := chain(3)
		recs[1].Links[0].PrevHash[0] ^= 1
		broken(t, recs, 1, 2, "previous hash")
	})
	t.Run("consistent rewrite of one event still breaks the next", func(t *testing.T) {
		recs := chain(3)
		recs[1].Data = json.RawMessage(`{"i":77}`)
		recs[1].Links[0].Hash = journal.ChainHash(recs[1].Links[0].PrevHash, journal.CanonicalBytes(&recs[1]))
		broken(t, recs, 2, 3, "previous hash")
	})
	t.Run("missing link", func(t *testing.T) {
		recs := chain(2)
		recs[1].Links = nil
		broken(t, recs, 1, 2, "no link")
	})
	t.Run("read error", func(t *testing.T) {
		n, err := journal.VerifyStream(ctx, streamReader{records: chain(3), failAt: 2}, stream)
		require.Equal(t, uint64(2), n)
		require.EqualError(t, err, "disk on fire")
	})
}

// inspectedReader is a streamReader that also reports recorded summaries,
// one per call in order (the last repeats).
type inspectedReader struct {
	streamReader
	journal.Inspector
	summaries []journal.TagSummary
	calls     *int
}

func (r inspectedReader) TagSummary(_ context.Context, stream journal.StreamID) (journal.TagSummary, error) {
	i := min(*r.calls, len(r.summaries)-1)
	*r.calls++
	return r.summaries[i], nil
}

func TestVerifyStreamChecksTheRecordedHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stream := journal.StreamID{Tag: "account:42"}
	recs := chain(4)
	head := func(n int) journal.TagSummary {
		return journal.TagSummary{Stream: stream.Normalize(), Version: uint64(n), HeadHash: recs[n-1].Links[0].Hash, LastPosition: recs[n-1].Position}
	}
	verify := func(read []journal.Record, sums ...journal.TagSummary) (uint64, error) {
		calls := 0
		return journal.VerifyStream(ctx, inspectedReader{streamReader: streamReader{records: read, failAt: -1}, summaries: sums, calls: &calls}, stream)
	}

	n, err := verify(recs, head(4))
	require.NoError(t, err)
	require.Equal(t, uint64(4), n)
	n, err = verify(recs, head(3))
	require.NoError(t, err, "an event appended after the summary was read is a chain link like any other")
	require.Equal(t, uint64(4), n)

	n, err = verify(recs[:3], head(4))
	var ce *journal.ChainError
	require.ErrorAs(t, err, &ce, "truncated: the recorded version is beyond the last event")
	require.Equal(t, uint64(3), n)
	require.Equal(t, uint64(4), ce.Version)
	require.Equal(t, recs[3].Position, ce.Position, "the position recorded for the missing newest event")
	require.Contains(t, ce.Reason, "newest events were removed")

	forged := head(4)
	forged.HeadHash[0] ^= 1
	_, err = verify(recs, forged)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint64(4), ce.Version)
	require.Contains(t, ce.Reason, "recorded head hash")

	n, err = verify(recs, journal.TagSummary{Stream: stream.Normalize()})
	require.ErrorAs(t, err, &ce, "events without a recorded head")
	require.Equal(t, uint64(4), n)
	require.Equal(t, uint64(4), ce.Version)
	require.Equal(t, recs[3].Position, ce.Position)
	require.Contains(t, ce.Reason, "stream record was removed")

	n, err = verify(recs, journal.TagSummary{Stream: stream.Normalize()}, head(4))
	require.NoError(t, err, "the stream's first events were appended while it was verified")
	require.Equal(t, uint64(4), n)
}
