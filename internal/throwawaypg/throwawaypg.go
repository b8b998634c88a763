package throwawaypg

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/scribe-es/scribe/internal/freeport"
	"github.com/scribe-es/scribe/internal/pgtest"
)

// Server is a running (or stopped) throwaway PostgreSQL server.
type Server struct {
	t      testing.TB
	bin    string
	dir    string
	port   int
	runAs  []string // runuser prefix when root
	logf   string
	active bool
}

// Option adjusts a server before it first starts.
type Option func(*options)

type options struct {
	epoch uint32
}

// XIDEpoch makes the server's transaction IDs start in the given epoch
// (pg_resetwal --epoch): 64-bit transaction IDs (pg_current_xact_id) are then
// at least epoch × 2^32, as in a database that has used that many transaction
// IDs, while 32-bit xids (pg_locks, xmin) wrap as usual.
func XIDEpoch(epoch uint32) Option { return func(o *options) { o.epoch = epoch } }

// Start creates and starts a server; it is stopped and deleted at cleanup.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin := findBinaries()
	if bin == "" {
		msg := "!!! no PostgreSQL server binaries (initdb, pg_ctl): this outage test did not run; install the postgresql server package"
		if os.Getenv(pgtest.EnvRequire) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s := newServer(t, bin)
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s.run("initdb", "-D", filepath.Join(s.dir, "data"), "-U", "postgres", "-A", "trust", "--no-sync")
	if o.epoch > 0 {
		s.run("pg_resetwal", "--epoch", strconv.FormatUint(uint64(o.epoch), 10), "-D", filepath.Join(s.dir, "data"))
	}
	s.Start()
	s.run("createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "postgres", "test")
	return s
}

// newServer prepares an empty directory for a server (owned by the user the
// server runs as) and a free port; the directory is deleted at cleanup.
func newServer(t testing.TB, bin string) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "scribe-throwaway-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, bin: bin, dir: dir, port: freePort(t), logf: filepath.Join(dir, "server.log")}
	t.Cleanup(func() {
		s.Stop()
		_ = os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		name := "postgres"
		if _, err := user.Lookup(name); err != nil {
			name = "nobody"
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			t.Fatalf("running as root needs runuser to start PostgreSQL as an unprivileged user: %v", err)
		}
		s.runAs = []string{runuser, "-u", name, "--"}
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return s
}

// URL is the connection URL of the server's database "test".
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable", s.port)
}

// Start starts the (stopped) server again on the same port and data, and
// waits until it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-l", s.logf, "-w", "-t", "60",
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100", s.port, s.dir), "start")
	s.active = true
}

// Stop stops the server at once (immediate shutdown: connections are cut, as
// in a crash or a network loss) and waits until it is down. Stopping a
// stopped server does nothing.
func (s *Server) Stop() {
	if !s.active {
		return
	}
	s.active = false
	cmd := s.command("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Logf("pg_ctl stop: %v: %s", err, out)
	}
}

func (s *Server) command(tool string, args ...string) *exec.Cmd {
	argv := append(slices.Clone(s.runAs), filepath.Join(s.bin, tool))
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	return cmd
}

func (s *Server) run(tool string, args ...string) {
	s.t.Helper()
	if out, err := s.command(tool, args...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(s.logf)
		s.t.Fatalf("%s: %v: %s\nserver log:\n%s", tool, err, out, log)
	}
}

// findBinaries returns the directory of initdb and pg_ctl, or "".
func findBinaries() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(r))
		}
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) && isExec(filepath.Join(d, "createdb")) {
			return d
		}
	}
	return ""
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&0o111 != 0
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	return freeport.Port(t)
}
