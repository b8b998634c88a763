package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
)

// SetAfterChecks installs a hook that runs inside every unbatched append
// transaction after its checks passed and before it inserts.
func (j *Journal) SetAfterChecks(f func(ctx context.Context, conn *pgxpool.Conn) error) {
	j.hooks.afterChecks = f
}

// SetBeforeCommit installs a hook that runs right before COMMIT of every
// unbatched append (COMMIT is then sent on its own).
func (j *Journal) SetBeforeCommit(f func(ctx context.Context, conn *pgxpool.Conn) error) {
	j.hooks.beforeCommit = f
}

// HoldAppend runs an append in its own transaction up to, not including,
// COMMIT: its position is assigned and its rows written but invisible. release
// commits it.
func (j *Journal) HoldAppend(ctx context.Context, events []journal.Event, opts journal.AppendOptions) (func() (journal.AppendResult, error), error) {
	prepared, partition, err := journal.PrepareAppend(events, opts, j.limits)
	if err != nil {
		return nil, err
	}
	_, release, err := j.appendDirect(ctx, j.newAppendReq(ctx, prepared, partition, opts), modeHold)
	return release, err
}

// NotifyChannel is the NOTIFY channel of a schema.
func NotifyChannel(schema string) string { return notifyChannel(schema) }
