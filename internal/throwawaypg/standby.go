package throwawaypg

import (
	"path/filepath"
	"strconv"
	"testing"
)

// StartStandby makes a streaming standby of s with pg_basebackup -R (a hot
// standby: it serves read-only queries while it replays the WAL s streams to
// it), starts it on a port of its own and waits until it accepts connections.
// It is stopped and deleted at cleanup; s must be running. The standby lags s
// by whatever replication takes: wait for a position with
// pg_last_wal_replay_lsn, never assume it is current.
func (s *Server) StartStandby(t testing.TB) *Server {
	t.Helper()
	st := newServer(t, s.bin)
	st.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "postgres",
		"-D", filepath.Join(st.dir, "data"), "-R", "-X", "stream", "-c", "fast", "--no-sync")
	st.Start()
	return st
}

// Promote ends the standby's recovery (pg_ctl promote) and waits until it
// accepts writes: it is a primary from then on.
func (s *Server) Promote() {
	s.t.Helper()
	s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-w", "-t", "60", "promote")
}
