package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"strconv"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
)

// KeyReusedError details ErrIdempotencyKeyReused.
type KeyReusedError struct {
	// Stream, of an aggregate command, or Command, a DCB command's name.
	Stream       journal.StreamID
	Command, Key string
}

func (e *KeyReusedError) Error() string {
	where := "on stream " + e.Stream.String()
	if e.Command != "" {
		where = "by DCB command " + strconv.Quote(e.Command)
	}
	return fmt.Sprintf("runtime: idempotency key %q was first used %s for a different command; nothing was executed: use a new key for a new command, and the same key only to retry the identical command", e.Key, where)
}

// Is matches ErrIdempotencyKeyReused.
func (e *KeyReusedError) Is(target error) bool { return target == ErrIdempotencyKeyReused }

// commandHash fingerprints a command: its Go type and its encoding by the
// codec. It is stored with the events of a keyed command
// (journal.Metadata.CommandHash), so a repeat of the key can be told to be a
// retry (same hash) or a different command, also after a restart. A command
// the codec cannot encode gets no fingerprint and is not checked.
func commandHash(c Codec, command any) string {
	data, err := c.Marshal(command)
	if err != nil {
		return ""
	}
	h := sha256.New()
	h.Write([]byte(reflect.TypeOf(command).String()))
	h.Write([]byte{0})
	h.Write(data)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// firstOutcome checks that a duplicate answers the same command and turns it
// into the first execution's outcome: its records, the stream version right
// after them and the aggregate state right after them, folded from the
// journal (so the answer is the same after a restart).
func (rt *Runtime) firstOutcome(ctx context.Context, stream journal.StreamID, md journal.Metadata, res actors.Result) (actors.Result, error) {
	if len(res.Records) == 0 {
		return res, nil
	}
	if stored := res.Records[0].Metadata.CommandHash; stored != "" && md.CommandHash != "" && stored != md.CommandHash {
		return actors.Result{}, &KeyReusedError{Stream: stream, Key: md.IdempotencyKey}
	}
	model := rt.reg.model(stream.Tag.Group())
	if model == nil {
		return res, nil
	}
	last := res.Records[len(res.Records)-1].Version(stream.Tag)
	state := model.Initial()
	var seen uint64
	// The state is folded from version 1: on a journal that archives, the
	// stream's oldest events may be archived (ReadStream would fail with
	// journal.ErrArchived), so read through the archive where it can.
	read := rt.cfg.Journal.ReadStream
	if ar, ok := rt.cfg.Journal.(journal.ArchiveReader); ok {
		read = ar.ReadStreamWithArchive
	}
	for rec, err := range read(ctx, stream, 1, int(last)) {
		if err != nil {
			return actors.Result{}, fmt.Errorf("runtime: rebuilding the first outcome of idempotency key %q on stream %s: %w", md.IdempotencyKey, stream, err)
		}
		ev, err := model.DecodeEvent(ctx, &rec)
		if err != nil {
			return actors.Result{}, fmt.Errorf("runtime: rebuilding the first outcome of idempotency key %q on stream %s: %w", md.IdempotencyKey, stream, err)
		}
		state = model.Evolve(state, ev)
		seen = rec.Version(stream.Tag)
	}
	if seen != last {
		return actors.Result{}, fmt.Errorf("runtime: rebuilding the first outcome of idempotency key %q on stream %s: read up to version %d of %d", md.IdempotencyKey, stream, seen, last)
	}
	res.Version, res.State = last, state
	return res, nil
}
