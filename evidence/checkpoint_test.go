package evidence_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/evidence"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
)

type fixture struct {
	j    *memory.Journal
	recs []journal.Record
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
}

// setup fills a memory journal: accounts a, b, c with 5 events each (a
// transfer a→b in both chains), 3 untagged events of one type and 2 in
// partition "east".
func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{j: memory.New()}
	var err error
	f.pub, f.priv, err = ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	add := func(typ string, partition string, tags ...journal.Tag) {
		res, err := f.j.Append(t.Context(), []journal.Event{{ID: journal.NewEventID(), Type: typ, SchemaVersion: 1, Tags: tags,
			Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, len(f.recs))), Metadata: journal.Metadata{Partition: partition, UserID: "u"}}}, journal.AppendOptions{})
		require.NoError(t, err)
		f.recs = append(f.recs, res.Records...)
	}
	for i := range 5 {
		for _, acc := range []string{"a", "b", "c"} {
			add("Deposited", "", journal.NewTag("account", acc))
		}
		if i == 2 {
			add("Transferred", "", "account:a", "account:b")
		}
	}
	for range 3 {
		add("RatesPublished", "")
	}
	add("Deposited", "east", "account:a")
	add("Deposited", "east", "account:a")
	return f
}

func (f *fixture) make(t *testing.T, src evidence.Source) *evidence.Checkpoint {
	t.Helper()
	c, err := evidence.Make(t.Context(), src, evidence.MakeOptions{Journal: "test", Workers: 3})
	require.NoError(t, err)
	require.NoError(t, c.Sign(f.priv))
	return c
}

// rewritten is a journal whose administrator rewrote one stream
// consistently: the event at version at got data, and every later hash of
// the stream and its recorded head were recomputed; or whose newest drop
// events were removed with the head set back. Chain verification alone
// passes on it.
type rewritten struct {
	journal.Journal
	stream journal.StreamID
	at     uint64
	data   json.RawMessage
	drop   uint64
}

func (r *rewritten) records(ctx context.Context) ([]journal.Record, error) {
	var out []journal.Record
	for rec, err := range r.Journal.ReadStream(ctx, r.stream, 1, 0) {
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	out = out[:uint64(len(out))-r.drop]
	var prev journal.Hash
	for i := range out {
		rec := &out[i]
		rec.Links = append([]journal.StreamLink(nil), rec.Links...)
		if uint64(i+1) == r.at {
			rec.Data = r.data
		}
		for k := range rec.Links {
			if rec.Links[k].Tag == r.stream.Tag {
				rec.Links[k].PrevHash = prev
				rec.Links[k].Hash = journal.ChainHash(prev, journal.CanonicalBytes(rec))
				prev = rec.Links[k].Hash
			}
		}
	}
	return out, nil
}

func (r *rewritten) ReadStream(ctx context.Context, stream journal.StreamID, from uint64, limit int) iter.Seq2[journal.Record, error] {
	if stream.Normalize() != r.stream {
		return r.Journal.ReadStream(ctx, stream, from, limit)
	}
	return func(yield func(journal.Record, error) bool) {
		recs, err := r.records(ctx)
		if err != nil {
			yield(journal.Record{}, err)
			return
		}
		n := 0
		for _, rec := range recs[from-1:] {
			if limit > 0 && n == limit {
				return
			}
			n++
			if !yield(rec, nil) {
				return
			}
		}
	}
}

func (r *rewritten) TagSummary(ctx context.Context, stream journal.StreamID) (journal.TagSummary, error) {
	sum, err := r.Journal.TagSummary(ctx, stream)
	if err != nil || stream.Normalize() != r.stream {
		return sum, err
	}
	recs, err := r.records(ctx)
	if err != nil {
		return sum, err
	}
	last := recs[len(recs)-1]
	sum.Version = last.Version(r.stream.Tag)
	sum.LastPosition = last.Position
	for _, l := range last.Links {
		if l.Tag == r.stream.Tag {
			sum.HeadHash = l.Hash
		}
	}
	return sum, nil
}

func (f *fixture) nth(tag journal.Tag, version uint64) journal.Record {
	for _, r := range f.recs {
		if r.Partition() == journal.DefaultPartition && r.Version(tag) == version {
			return r
		}
	}
	panic("no such record")
}

// TestCheckpointRoundTrip: a checkpoint of a memory journal covers every
// stream (the untagged chain and a second partition included), survives
// its file encoding, verifies with its key, and the unchanged journal
// extends it.
func TestCheckpointRoundTrip(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var progress []evidence.Progress
	c, err := evidence.Make(t.Context(), f.j, evidence.MakeOptions{Journal: "test", Progress: func(p evidence.Progress) { progress = append(progress, p) },
		Now: func() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 6789, time.UTC) }})
	require.NoError(t, err)
	require.NoError(t, c.Sign(f.priv))
	require.EqualValues(t, 5, c.Statement.Streams, "a, b, c, east/a and the untagged chain")
	require.EqualValues(t, 6+6+5+3+2, c.Events, "the transfer counts in a and b")
	require.Len(t, progress, 5)
	require.Equal(t, time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC), c.MadeAt)
	require.Equal(t, journal.StreamID{Partition: "default", Tag: journal.UntaggedChain("RatesPublished")}, c.Streams[0].ID(), "$ sorts first")
	require.Equal(t, "east", c.Streams[4].Partition)

	var buf bytes.Buffer
	n, err := c.WriteTo(&buf)
	require.NoError(t, err)
	require.EqualValues(t, buf.Len(), n)
	line, _, _ := bytes.Cut(buf.Bytes(), []byte("\n"))
	var stmt map[string]any
	require.NoError(t, json.Unmarshal(line, &stmt), "the first line is the statement in JSON")
	require.Equal(t, "scribe.checkpoint.v1", stmt["format"])
	require.Equal(t, "2030-01-02T03:04:05.000006Z", stmt["madeAt"])

	back, err := evidence.Decode(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	require.Equal(t, c, back)
	require.NoError(t, back.Verify(f.pub))
	divs, err := evidence.Compare(t.Context(), f.j, back, evidence.CompareOptions{})
	require.NoError(t, err)
	require.Empty(t, divs)

	// Appends after the checkpoint extend it.
	_, err = f.j.Append(t.Context(), []journal.Event{{ID: journal.NewEventID(), Type: "Deposited", Tags: []journal.Tag{"account:a", "account:new"}, Data: json.RawMessage(`{}`)}}, journal.AppendOptions{})
	require.NoError(t, err)
	divs, err = evidence.Compare(t.Context(), f.j, back, evidence.CompareOptions{})
	require.NoError(t, err)
	require.Empty(t, divs)

	// Through a directory sink.
	dir := t.TempDir()
	name, err := evidence.DirSink{Dir: dir}.Put(t.Context(), c)
	require.NoError(t, err)
	files, err := evidence.ListDir(dir)
	require.NoError(t, err)
	require.Equal(t, []string{name}, files)
	fromFile, err := evidence.ReadFile(name)
	require.NoError(t, err)
	require.NoError(t, fromFile.Verify(f.pub))
	_, err = evidence.ListDir(t.TempDir())
	require.ErrorContains(t, err, "holds no checkpoint files")
}

// TestCompareNamesTheFirstRewrittenEvent is the tamper test on memory: a
// consistent rewrite (payload, every later hash, the recorded head) passes
// chain verification, but Compare names the stream, the version and the
// event; a deleted newest event and a truncated untagged chain are named
// too.
func TestCompareNamesTheFirstRewrittenEvent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := f.make(t, f.j)
	a := journal.Stream("account:a")

	cases := []struct {
		name    string
		src     *rewritten
		version uint64
		reason  string
	}{
		{"rewritten payload", &rewritten{Journal: f.j, stream: a, at: 2, data: json.RawMessage(`{"n":999}`)}, 2, "was altered after the checkpoint"},
		{"deleted newest event", &rewritten{Journal: f.j, stream: a, drop: 1}, 6, "events were removed"},
		{"truncated untagged chain", &rewritten{Journal: f.j, stream: journal.Stream(journal.UntaggedChain("RatesPublished")), drop: 2}, 2, "events were removed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := journal.VerifyStream(t.Context(), tc.src, tc.src.stream)
			require.NoError(t, err, "the rewrite is consistent: the chain alone verifies")
			divs, err := evidence.Compare(t.Context(), tc.src, c, evidence.CompareOptions{})
			require.NoError(t, err)
			require.Len(t, divs, 1, "%+v", divs)
			d := divs[0]
			require.Equal(t, tc.src.stream, d.Stream)
			require.Equal(t, tc.version, d.Version)
			want := f.nth(tc.src.stream.Tag, tc.version)
			require.Equal(t, want.ID, d.EventID)
			require.Contains(t, d.Reason, tc.reason)
			require.Contains(t, d.Error(), want.ID.String())

			// A checkpoint cannot be made of it either way... it can: the
			// rewrite is consistent. The new checkpoint differs from the old.
			c2 := f.make(t, tc.src)
			require.NotEqual(t, c.Root, c2.Root)
		})
	}
}

// TestMakeRefusesABrokenChain: an inconsistent change (payload only) is
// never signed.
func TestMakeRefusesABrokenChain(t *testing.T) {
	t.Parallel()
	f := setup(t)
	src := &broken{Journal: f.j}
	_, err := evidence.Make(t.Context(), src, evidence.MakeOptions{})
	var ce *journal.ChainError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, journal.Stream("account:b"), ce.Stream)
	require.EqualValues(t, 1, ce.Version)
	require.Contains(t, ce.Reason, "does not match")
}

// broken alters the data of account:b's first event without its hash.
type broken struct{ journal.Journal }

func (b *broken) ReadStream(ctx context.Context, stream journal.StreamID, from uint64, limit int) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		for r, err := range b.Journal.ReadStream(ctx, stream, from, limit) {
			if stream.Tag == "account:b" && r.Version("account:b") == 1 {
				r.Data = json.RawMessage(`{"n":-1}`)
			}
			if !yield(r, err) {
				return
			}
		}
	}
}

// TestSignatureFailures: a wrong public key, a tampered signature, an
// altered statement and an altered body each fail, saying which.
func TestSignatureFailures(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := f.make(t, f.j)
	other, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	require.ErrorIs(t, c.Verify(other), evidence.ErrWrongKey)

	sig := *c
	sig.Signature = append([]byte(nil), c.Signature...)
	sig.Signature[10] ^= 1
	require.ErrorIs(t, sig.Verify(f.pub), evidence.ErrBadSignature)

	stmt := *c
	stmt.Statement.Events++
	require.ErrorIs(t, stmt.Verify(f.pub), evidence.ErrBadSignature)

	var buf bytes.Buffer
	_, err = c.WriteTo(&buf)
	require.NoError(t, err)
	b := buf.Bytes()
	b[len(b)-40] ^= 1 // inside the last event hash
	body, err := evidence.Decode(bytes.NewReader(b))
	require.NoError(t, err)
	require.ErrorIs(t, body.Verify(f.pub), evidence.ErrCorrupt)
	require.ErrorContains(t, body.Verify(f.pub), "east/account:a")

	_, err = evidence.Decode(bytes.NewReader(b[:len(b)-1]))
	require.ErrorIs(t, err, evidence.ErrCorrupt)
}

// TestKeyFiles: keygen writes a 0600 private key and a public key that
// read back; it never overwrites.
func TestKeyFiles(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "signing.key")
	pub, err := evidence.GenerateKeyFiles(path)
	require.NoError(t, err)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	priv, err := evidence.ReadPrivateKey(path)
	require.NoError(t, err)
	require.Equal(t, pub, priv.Public())
	back, err := evidence.ReadPublicKey(path + ".pub")
	require.NoError(t, err)
	require.Equal(t, pub, back)
	_, err = evidence.GenerateKeyFiles(path)
	require.ErrorContains(t, err, "exists")
	_, err = evidence.ReadPublicKey(path)
	require.ErrorContains(t, err, "not a PEM \"PUBLIC KEY\" file")
}
