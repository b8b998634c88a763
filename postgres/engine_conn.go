package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// acquireLive takes a pooled connection whose server end is not already known
// closed. A pooled connection can outlive its server end (a restarted
// database, a proxy or load balancer that dropped it); an append sent on one
// can only end in journal.ErrOutcomeUnknown, since its COMMIT went out and no
// answer came back. So each acquired connection is first checked
// (closedByPeer: one non-blocking peek at its socket), and a closed one is
// discarded for the next, at most once per pooled connection plus one new
// connection. An error from the pool (no connection could be made) or the
// end of ctx is returned as is.
func (j *Journal) acquireLive(ctx context.Context) (*pgxpool.Conn, error) {
	tries := int(j.pool.Config().MaxConns) + 1
	for i := 0; ; i++ {
		conn, err := j.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		if i+1 >= tries || !closedByPeer(ctx, conn.Conn().PgConn()) {
			j.server.observe(conn, j.cfg.Logger)
			return conn, nil
		}
		j.server.lost()
		if err := ctx.Err(); err != nil {
			conn.Release()
			return nil, err
		}
		j.stats.discarded.Add(1)
		// Closing marks the connection closed, so Release destroys it.
		cctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_ = conn.Conn().Close(cctx)
		cancel()
		conn.Release()
	}
}

// closedByPeer reports whether pc's server end is already known closed. The
// socket may only be peeked at when pgconn reads nothing in the background
// and holds no buffered input: after a write that took longer than 15 ms,
// pgconn leaves a background read pending on the socket, and a peek would
// wait for it. SyncConn settles that (immediately in the usual case, with one
// ping round trip after such a write); a connection it cannot settle counts
// as closed.
func closedByPeer(ctx context.Context, pc *pgconn.PgConn) bool {
	if err := pc.SyncConn(ctx); err != nil {
		return true
	}
	return peerClosed(pc.Conn())
}
