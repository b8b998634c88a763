package pgadmin

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// RetireStream closes stream for good behind a tombstone: from its commit on,
// every append naming the stream fails with a *journal.StreamRetiredError
// (journal.ErrStreamRetired), so its versions are never reused. It waits for
// an append to the stream in flight (it takes the stream's append lock) and
// returns the stream's summary. Its events stay readable until an Archive run
// (with any policy) retires them all; retiring a retired stream again does
// nothing. A stream without events cannot be retired (journal.ErrNotFound):
// there is nothing to close.
func (a *Admin) RetireStream(ctx context.Context, stream journal.StreamID) (journal.TagSummary, error) {
	stream = stream.Normalize()
	if stream.Tag == "" {
		return journal.TagSummary{}, fmt.Errorf("%w: RetireStream: the stream's tag is empty; name the stream to retire", journal.ErrInvalidQuery)
	}
	err := pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, a.lockKey(pgschema.LockTag, stream.Partition, string(stream.Tag))); err != nil {
			return err
		}
		ct, err := tx.Exec(ctx, a.sql(`UPDATE __S__.streams SET retired = true, retired_at = coalesce(retired_at, clock_timestamp())
			WHERE partition = $1 AND tag = $2 AND version > 0`), stream.Partition, string(stream.Tag))
		if err != nil {
			return err
		}
		if ct.RowsAffected() == 0 {
			return fmt.Errorf("%w: stream %s has no events, so there is nothing to retire; check the tag and partition", journal.ErrNotFound, stream)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, journal.ErrNotFound) {
			return journal.TagSummary{}, err
		}
		return journal.TagSummary{}, a.translate("retire stream", err)
	}
	return a.journal.TagSummary(ctx, stream)
}
