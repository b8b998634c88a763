// Package evidence makes, signs, stores and checks signed checkpoints of a
// journal's hash chains, and inclusion proofs of single events against them.
//
// # What each proves, against whom
//
// The hash chains (journal.VerifyStream) prove integrity against accidents:
// a changed, removed, inserted or re-ordered event breaks its chain. They
// do not hold against whoever can write the database: a rewrite that also
// recomputes every later hash and the recorded head verifies. A signed
// checkpoint holds against that administrator: it is a statement of every
// chain's events at one time, signed with an Ed25519 key the database never
// holds, kept outside it; Compare names the first event of each stream that
// no longer matches it, whatever was recomputed. It does not hold against
// someone who holds the signing key as well (they can sign a checkpoint of
// the rewritten journal), nor does it say anything of events appended after
// it (the next checkpoint does). An inclusion proof shows one event, and no
// other, to a third party that holds only the public key.
//
// # The tree
//
// A checkpoint is a two-level Merkle tree, each level shaped as RFC 9162
// (section 2.1.1) shapes a tree: the left subtree of n leaves holds the
// largest power of two smaller than n; an interior node is
// SHA-256(0x01 || left || right); no leaves give SHA-256 of nothing.
//
//   - Each stream (a tag in a partition; each untagged chain
//     "$untagged:TYPE" is a stream) has a tree over its events 1..Version,
//     leaf v-1 being EventLeaf(ID, chain hash of version v) =
//     SHA-256(0x00 || 16-byte event ID || 32-byte chain hash).
//   - The checkpoint's tree has one leaf per stream, ordered by partition
//     then tag (byte order), StreamLeaf = SHA-256(0x02 || str(partition) ||
//     str(tag) || uint64 version || head hash || stream root), str being a
//     uint64 big-endian length then the bytes.
//
// Its root is signed. Because a chain hash covers everything before it,
// the stream leaf pins the stream's whole history; because each event is a
// leaf of its own, a verifier holding the checkpoint's leaves compares the
// journal event by event and names the first one that differs, and an
// inclusion proof needs ceil(log2 version) + ceil(log2 streams) hashes.
//
// # The signed statement
//
// Statement.SignedBytes is what the signature covers (format
// "scribe.checkpoint.v1"):
//
//	str("scribe.checkpoint.v1") str(journal label)
//	uint64 position commit, uint64 position seq   (the head when begun)
//	int64 made-at, microseconds since 1970 UTC
//	uint64 streams, uint64 events
//	root (32 bytes), key ID (32 bytes: SHA-256 of the 32-byte public key)
//
// Its JSON form (Signed.MarshalJSON), the first line of a checkpoint file and
// the "checkpoint" of a proof: {"format", "journal", "position"
// ("commit.seq"), "madeAt" (RFC 3339, UTC, microseconds), "streams",
// "events", "root" and "keyId" (lowercase hex), "signature" (base64)}. The
// verifier recomputes the signed bytes from these fields.
//
// # The checkpoint file
//
// One file per checkpoint (Checkpoint.WriteTo, Decode): the statement's
// JSON on one line ending in "\n", then a binary body: str("scribe.
// checkpoint.body.v1"), then for each stream in order str(partition)
// str(tag) uint64 version, head (32), root (32), then version times the
// event's 16-byte ID and 32-byte chain hash. So a checkpoint costs 48 bytes
// per event and stream link (an event with two tags counts twice) plus
// about 100 bytes per stream. The body needs no signature of its own:
// Checkpoint.Verify recomputes the root from it.
//
// # Proofs
//
// A Proof (format "scribe.proof.v1", JSON) carries the event's canonical
// bytes (journal.CanonicalBytes) and the chain hash before it, the audit
// paths of its event leaf and of its stream leaf, the stream's entry and the
// signed statement. Verify decodes the event from the canonical bytes, so
// what an auditor is shown is what was hashed. Sealed fields (package
// erasure) stay sealed in the bytes: a proof shows ciphertext.
//
// # Making them
//
// Make builds a checkpoint and Checkpoint.Sign signs it; MakeSigned does
// both and puts it into a Sink (DirSink: one file per checkpoint;
// WriterSink: any io.Writer; or a service's own), on demand; Schedule does
// so at once and then once per interval (or per tick of a channel the
// caller owns) until its context ends, which is what `scribe checkpoint
// -every` runs.
//
// # Reading the journal
//
// Make and Compare read through journal interfaces only (Reader, Inspector,
// and, when offered, journal.ArchiveReader and StreamLister), so they run
// on every backend. Archived events are read from the archive: archiving
// changes no hash, nor does erasure (which destroys keys, not bytes), so
// a checkpoint keeps verifying after both.
//
// "Checkpoint" here is always the signed checkpoint of this package; a
// stream's archive cut is journal.Checkpoint.
package evidence
