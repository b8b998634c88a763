package postgres

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
)

var _ journal.ServerWatcher = (*Journal)(nil)

// serverWatch follows which database server the journal's connections reach
// (journal.ServerWatcher): the address of the last connection an append
// took, and an epoch raised when that address changes or a connection was
// lost (a restarted server, a failover behind one address, a network loss).
type serverWatch struct {
	epoch atomic.Uint64
	addr  atomic.Pointer[string]
}

// observe notes the server conn is connected to; a new address raises the
// epoch (the first one seen does not) and is logged.
func (w *serverWatch) observe(conn *pgxpool.Conn, log *slog.Logger) {
	nc := conn.Conn().PgConn().Conn()
	if nc == nil {
		return
	}
	addr := nc.RemoteAddr().String()
	old := w.addr.Load()
	if old != nil && *old == addr {
		return
	}
	if w.addr.CompareAndSwap(old, &addr) && old != nil {
		w.epoch.Add(1)
		log.Info("postgres: appends now reach another database server (a failover or a restart behind the same URL); stream actors re-read their streams before serving from their caches",
			"previous_server", *old, "server", addr)
	}
}

// lost notes that a connection failed or was found closed by the server.
func (w *serverWatch) lost() { w.epoch.Add(1) }

// ServerEpoch implements journal.ServerWatcher: it rises when appends reach
// another server address or a call finds the database unreachable. No I/O.
func (j *Journal) ServerEpoch() uint64 { return j.server.epoch.Load() }

// ServerAddress returns the address (host:port, or a socket path) of the
// server a connection of pool reaches now: with a multi-host URL, the host
// actually chosen (for target_session_attrs=read-write, the primary). It
// takes one connection from the pool and sends nothing.
func ServerAddress(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return "", translateErr("", "acquiring a connection", err)
	}
	defer conn.Release()
	nc := conn.Conn().PgConn().Conn()
	if nc == nil {
		return "", errors.New("postgres: the connection has no network connection")
	}
	return nc.RemoteAddr().String(), nil
}
