package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/evidence"
	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

// signed is a fixture with a signing key pair and a checkpoint directory.
type signed struct {
	*fixture
	key, pub, dir string
}

func setupSigned(t *testing.T) *signed {
	t.Helper()
	f := setup(t, true)
	tmp := t.TempDir()
	s := &signed{fixture: f, key: filepath.Join(tmp, "signing.key"), pub: filepath.Join(tmp, "signing.key.pub"), dir: filepath.Join(tmp, "checkpoints")}
	res := f.scribe(t, "checkpoint", "keygen", "-out", s.key)
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "mode 0600")
	st, err := os.Stat(s.key)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	return s
}

// checkpoint runs `scribe checkpoint` and returns the file it wrote.
func (s *signed) checkpoint(t *testing.T) string {
	t.Helper()
	res := s.scribe(t, "checkpoint", "-key", s.key, "-out", s.dir, "-json")
	require.Equal(t, exitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	var out struct {
		File string `json:"file"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out))
	return out.File
}

// verifyCheckpoints runs `scribe verify -checkpoints`.
func (s *signed) verifyCheckpoints(t *testing.T, args ...string) result {
	t.Helper()
	return s.scribe(t, append([]string{"verify", "-checkpoints", s.dir, "-pubkey", s.pub}, args...)...)
}

// proof runs `scribe proof` and writes what it printed to a file.
func (s *signed) proof(t *testing.T, id, checkpoint string, flags ...string) (string, result) {
	t.Helper()
	res := s.scribe(t, append([]string{"proof", id, "-checkpoint", checkpoint}, flags...)...)
	path := filepath.Join(t.TempDir(), "proof.json")
	require.NoError(t, os.WriteFile(path, []byte(res.stdout), 0o644))
	return path, res
}

// rewrite is a consistent rewrite done in SQL, as a database administrator
// could: stream's events are read, the one at version at gets data (when
// data is set), every hash of the stream from there on is recomputed into
// the events' hashes and prev_hashes columns, and the stream's recorded
// head is set to the new last hash. With drop, the stream's newest drop
// events are deleted (events and tag index) and its version, head and last
// position set back. Afterwards every chain verifies.
func (s *signed) rewrite(t *testing.T, stream journal.StreamID, at uint64, data string, drop int) {
	t.Helper()
	var recs []journal.Record
	for r, err := range s.journal.ReadStreamWithArchive(t.Context(), stream, 1, 0) {
		require.NoError(t, err)
		recs = append(recs, r)
	}
	for _, r := range recs[len(recs)-drop:] {
		require.EqualValues(t, 1, s.exec(t, `DELETE FROM __S__.events WHERE id = $1`, r.ID))
		s.exec(t, `DELETE FROM __S__.event_tags WHERE commit_xid = $1 AND seq = $2`, int64(r.Position.Commit), int64(r.Position.Seq))
	}
	recs = recs[:len(recs)-drop]
	var prev journal.Hash
	for i := range recs {
		r := &recs[i]
		changed := uint64(i+1) >= at
		if uint64(i+1) == at && data != "" {
			r.Data = json.RawMessage(data)
		}
		var prevs, hashes []byte
		for k := range r.Links {
			l := &r.Links[k]
			if l.Tag == stream.Tag {
				l.PrevHash = prev
				l.Hash = journal.ChainHash(prev, journal.CanonicalBytes(r))
				prev = l.Hash
			}
			prevs = append(prevs, l.PrevHash[:]...)
			hashes = append(hashes, l.Hash[:]...)
		}
		if changed {
			require.EqualValues(t, 1, s.exec(t, `UPDATE __S__.events SET data = $2, prev_hashes = $3, hashes = $4 WHERE id = $1`, r.ID, []byte(r.Data), prevs, hashes))
		}
	}
	last := recs[len(recs)-1]
	require.EqualValues(t, 1, s.exec(t, `UPDATE __S__.streams SET version = $3, head_hash = $4, last_commit = $5, last_seq = $6 WHERE partition = $1 AND tag = $2`,
		stream.Partition, string(stream.Tag), int64(len(recs)), prev[:], int64(last.Position.Commit), int64(last.Position.Seq)))
}

// TestCheckpointDetectsConsistentRewrite is the tamper test: after a
// checkpoint, a payload rewritten with every later hash and the head
// recomputed in SQL, a deleted newest event and a truncated untagged chain
// each pass `scribe verify` (the chains alone) and fail `scribe verify
// -checkpoints` (exit 1), which names the stream and the first event that
// differs (version and ID). A proof made before the rewrite still verifies
// against the checkpoint; after it, `scribe proof` refuses, and a proof
// built from the rewritten event does not verify.
func TestCheckpointDetectsConsistentRewrite(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		tag    journal.Tag
		at     func(recs []journal.Record) journal.Record // the first event that differs
		data   string
		drop   int
		reason string
	}{
		{name: "rewritten payload", tag: bank.AccountTag("c"), data: `{"accountId":"c","amount":999999}`, reason: "was altered after the checkpoint",
			at: func(recs []journal.Record) journal.Record { return nth(t, recs, bank.AccountTag("c"), 1) }}, // c's deposit, version 2
		{name: "deleted newest event", tag: bank.AccountTag("a"), drop: 1, reason: "events were removed",
			at: func(recs []journal.Record) journal.Record { return last(recs, bank.AccountTag("a")) }},
		{name: "truncated untagged chain", tag: journal.UntaggedChain("RatesPublished"), drop: 2, reason: "events were removed",
			at: func(recs []journal.Record) journal.Record {
				return nth(t, recs, journal.UntaggedChain("RatesPublished"), 1)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setupSigned(t)
			recs := s.fillBank(t)
			for i := range 3 {
				res, err := s.journal.Append(t.Context(), []journal.Event{{ID: journal.NewEventID(), Type: "RatesPublished", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}}, journal.AppendOptions{})
				require.NoError(t, err)
				recs = append(recs, res.Records...)
			}
			for i := range recs { // nth and last find untagged events by their chain tag
				if len(recs[i].Tags) == 0 {
					recs[i].Tags = []journal.Tag{recs[i].Links[0].Tag}
				}
			}
			file := s.checkpoint(t)
			res := s.verifyCheckpoints(t)
			require.Equal(t, exitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
			require.Contains(t, res.stdout, "signature valid, 5 streams, 24 events: the journal still holds every event it covers")
			require.Contains(t, res.stdout, "every chain is intact")

			victim := tc.at(recs)
			newest := last(recs, tc.tag)
			before, res := s.proof(t, newest.ID.String(), file, "-tag", string(tc.tag))
			require.Equal(t, exitOK, res.code, res.stderr)

			stream := journal.Stream(tc.tag)
			s.rewrite(t, stream, victim.Version(tc.tag), tc.data, tc.drop)

			res = s.scribe(t, "verify")
			require.Equal(t, exitOK, res.code, "the rewrite is consistent: the chains alone verify\nstdout:\n%s", res.stdout)

			res = s.verifyCheckpoints(t)
			require.Equal(t, exitFailure, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
			want := fmt.Sprintf("DIVERGED %s at version %d (event %s) from checkpoint %s: ", stream, victim.Version(tc.tag), victim.ID, file)
			require.Contains(t, res.stdout, want)
			require.Contains(t, res.stdout, tc.reason)
			require.Equal(t, 1, strings.Count(res.stdout, "DIVERGED"), "only the rewritten stream:\n%s", res.stdout)
			require.Contains(t, res.stdout, "1 of its 5 streams differ")

			res = s.verifyCheckpoints(t, "-json", "-tag", string(tc.tag))
			require.Equal(t, exitFailure, res.code)
			require.Contains(t, res.stdout, fmt.Sprintf(`"eventId":"%s"`, victim.ID))

			// The proof made before holds: the auditor's evidence survives.
			res = s.scribe(t, "verify-proof", "-pubkey", s.pub, before)
			require.Equal(t, exitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
			require.Contains(t, res.stdout, fmt.Sprintf("verified: event %s", newest.ID))

			if tc.drop > 0 {
				res = s.scribe(t, "proof", newest.ID.String(), "-checkpoint", file)
				require.Equal(t, exitFailure, res.code)
				require.Contains(t, res.stderr, "no event with ID")
				return
			}
			// A proof of the event as the journal holds it now does not.
			res = s.scribe(t, "proof", newest.ID.String(), "-checkpoint", file, "-tag", string(tc.tag))
			require.Equal(t, exitFailure, res.code, res.stdout)
			require.Contains(t, res.stderr, "is not the event checkpoint")
			require.Empty(t, res.stdout)
			c, err := evidence.ReadFile(file)
			require.NoError(t, err)
			now, err := s.journal.ReadEvent(t.Context(), newest.ID)
			require.NoError(t, err)
			p, err := evidence.Prove(c, now, tc.tag)
			require.NoError(t, err)
			b, err := json.Marshal(p)
			require.NoError(t, err)
			after := filepath.Join(t.TempDir(), "after.json")
			require.NoError(t, os.WriteFile(after, b, 0o644))
			res = s.scribe(t, "verify-proof", "-pubkey", s.pub, after)
			require.Equal(t, exitFailure, res.code, res.stdout)
			require.Contains(t, res.stdout, "NOT VERIFIED")
			require.Contains(t, res.stdout, "differs from the one checkpointed")

			// A checkpoint made now covers the rewritten journal: only a
			// checkpoint made before the rewrite is evidence against it.
			s.checkpoint(t)
			res = s.verifyCheckpoints(t)
			require.Equal(t, exitFailure, res.code)
			require.Equal(t, 1, strings.Count(res.stdout, "DIVERGED"))
		})
	}
}

// TestCheckpointSurvivesErasureAndArchive: a checkpoint taken over sealed
// personal data and whole streams still verifies after the subject is
// erased (keys destroyed, bytes unchanged) and after events are archived
// (moved to the archive table); so does a proof of an archived event.
func TestCheckpointSurvivesErasureAndArchive(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := setupSigned(t)
	keySchema := s.schema + "_keys"
	t.Cleanup(func() { _, _ = s.pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+keySchema+`" CASCADE`) })
	res := s.scribe(t, "migrate", "keys", "-keys", keySchema)
	require.Equal(t, exitOK, res.code, res.stderr)
	ks, err := postgres.NewKeyStore(s.pool, postgres.KeyStoreConfig{Schema: keySchema})
	require.NoError(t, err)
	key, err := ks.DataKey(ctx, "cust-1")
	require.NoError(t, err)
	data, err := erasure.Seal([]byte(`{"customerId":"cust-1","name":"Name-Marker"}`), erasure.SealParams{EventType: "CustomerRegistered", Subject: "cust-1", Fields: []string{"name"}, Key: key})
	require.NoError(t, err)
	sealed, err := s.journal.Append(ctx, []journal.Event{{ID: journal.NewEventID(), Type: "CustomerRegistered", SchemaVersion: 1, Tags: []journal.Tag{"customer:cust-1"}, Data: data}}, journal.AppendOptions{})
	require.NoError(t, err)
	recs := s.fillBank(t)
	first := s.checkpoint(t)

	res = s.scribe(t, "erase", "cust-1", "-confirm", "-keys", keySchema, "-by", "test")
	require.Equal(t, exitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	res = s.verifyCheckpoints(t, "-keys", keySchema)
	require.Equal(t, exitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	require.Contains(t, res.stdout, "ERASED 1 event(s)")
	require.Contains(t, res.stdout, "the journal still holds every event it covers")

	_, err = s.admin.Archive(ctx, pgadmin.RetentionPolicy{Groups: map[string]pgadmin.RetentionRule{
		"account": {KeepLast: 1, NoSnapshotCheck: true}, "customer": {KeepLast: 1, NoSnapshotCheck: true}}}, pgadmin.ArchiveOptions{})
	require.NoError(t, err)
	sum, err := s.journal.TagSummary(ctx, journal.Stream(bank.AccountTag("a")))
	require.NoError(t, err)
	require.EqualValues(t, 5, sum.Cut.Version, "a's first five events are archived")
	second := s.checkpoint(t)

	for _, args := range [][]string{nil, {"-archive"}, {"-workers", "1"}} {
		res = s.verifyCheckpoints(t, append(args, "-keys", keySchema)...)
		require.Equal(t, exitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
		require.Equal(t, 2, strings.Count(res.stdout, "the journal still holds every event it covers"), res.stdout)
	}

	archived := nth(t, recs, bank.AccountTag("a"), 0)
	for _, cp := range []string{first, second} {
		for _, id := range []string{archived.ID.String(), sealed.Records[0].ID.String()} {
			path, res := s.proof(t, id, cp)
			require.Equal(t, exitOK, res.code, res.stderr)
			require.NotContains(t, res.stdout, "Name-Marker", "sealed fields stay sealed in a proof")
			res = s.scribe(t, "verify-proof", "-pubkey", s.pub, path)
			require.Equal(t, exitOK, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
		}
	}
}

// TestCheckpointKeysAndSignatures: a wrong public key, a tampered
// signature, an altered body and bad command lines each fail clearly.
func TestCheckpointKeysAndSignatures(t *testing.T) {
	t.Parallel()
	s := setupSigned(t)
	recs := s.fillBank(t)
	file := s.checkpoint(t)

	other := filepath.Join(t.TempDir(), "other.key")
	require.Equal(t, exitOK, s.scribe(t, "checkpoint", "keygen", "-out", other).code)
	res := s.scribe(t, "verify", "-checkpoints", s.dir, "-pubkey", other+".pub")
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stdout, "INVALID checkpoint "+file)
	require.Contains(t, res.stdout, "signed with another key")
	require.Contains(t, res.stdout, "every chain is intact", "the chains themselves are fine")

	proofFile, res := s.proof(t, recs[3].ID.String(), file)
	require.Equal(t, exitOK, res.code, res.stderr)
	res = s.scribe(t, "verify-proof", "-pubkey", other+".pub", proofFile)
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stdout, "signed with another key")

	// A tampered signature (the last base64 digits of the first line).
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	line, body, _ := strings.Cut(string(b), "\n")
	var stmt map[string]any
	require.NoError(t, json.Unmarshal([]byte(line), &stmt))
	sig := []byte(stmt["signature"].(string))
	sig[5] = map[bool]byte{true: 'B', false: 'A'}[sig[5] == 'A']
	stmt["signature"] = string(sig)
	doctored, err := json.Marshal(stmt)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, append(append(doctored, '\n'), body...), 0o644))
	res = s.verifyCheckpoints(t)
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stdout, "the signature does not verify")

	// An altered body (an event hash).
	bb := []byte(body)
	bb[len(bb)-3] ^= 1
	require.NoError(t, os.WriteFile(file, append([]byte(line+"\n"), bb...), 0o644))
	res = s.verifyCheckpoints(t)
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stdout, "checkpoint file corrupt: stream default/account:d")

	for _, args := range [][]string{
		{"verify", "-checkpoints", s.dir},
		{"checkpoint", "-key", s.key},
		{"checkpoint", "keygen"},
		{"proof", recs[0].ID.String()},
		{"verify-proof", proofFile},
		{"proof", "not-a-uuid", "-checkpoint", file},
	} {
		res := s.scribe(t, args...)
		require.Equal(t, exitUsage, res.code, "%v: %s", args, res.stderr)
	}
	res = s.scribe(t, "checkpoint", "keygen", "-out", s.key)
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, "never overwritten")
	res = s.scribe(t, "verify", "-checkpoints", t.TempDir(), "-pubkey", s.pub)
	require.Equal(t, exitFailure, res.code)
	require.Contains(t, res.stderr, "holds no checkpoint files")

	// Key material never reaches output.
	keyPEM, err := os.ReadFile(s.key)
	require.NoError(t, err)
	secret := strings.Split(string(keyPEM), "\n")[1]
	for _, r := range []result{res, s.scribe(t, "checkpoint", "-key", s.key, "-out", s.dir)} {
		require.NotContains(t, r.stdout+r.stderr, secret)
	}
}
