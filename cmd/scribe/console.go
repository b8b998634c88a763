package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/scribe-es/scribe/internal/console"
	"github.com/scribe-es/scribe/postgres"
)

func consoleCommand() *command {
	var addr string
	var allowActions bool
	var hosts hostList
	return &command{
		name:    "console",
		summary: "serve the web console (overview, streams, events, types, leases, projections, verify) on 127.0.0.1; read-only unless -allow-actions",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&addr, "addr", "127.0.0.1:7070", "address to listen on; give 0.0.0.0:PORT only behind an authenticating proxy (the console has no login)")
			fs.BoolVar(&allowActions, "allow-actions", false, "enable state changes from the pages (projection rebuild, each with a confirmation)")
			fs.Var(&hosts, "allowed-host", "a further name the console answers to (host, or host:port), such as the name an authenticating proxy forwards; repeat it or separate names with commas. Its own address and localhost always work; any other Host is refused")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			ps, err := postgres.NewProjectionStore(s.pool, s.cfg)
			if err != nil {
				return err
			}
			c, err := console.New(console.Config{
				Journal: s.journal, Admin: s.admin, Projections: ps, Schema: s.cfg.Schema, Database: postgres.Address(s.pool.Config().ConnConfig), AllowActions: allowActions,
				AllowedHosts: hosts,
			})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("cannot listen on %s: %w; pass another -addr", addr, err)
			}
			srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
			ctx, cancel := context.WithCancel(e.ctx)
			defer cancel()
			followErr := make(chan error, 1)
			go func() { followErr <- c.Follow(ctx) }()
			go func() {
				<-ctx.Done()
				_ = srv.Close()
			}()
			mode := "read-only"
			if allowActions {
				mode = "actions enabled"
			}
			fmt.Fprintf(e.stdout, "scribe console (%s) for schema %q: http://%s/ (Ctrl-C stops it)\n", mode, s.cfg.Schema, ln.Addr())
			err = srv.Serve(ln)
			cancel()
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			if ferr := <-followErr; err == nil && ferr != nil {
				err = ferr
			}
			return err
		},
	}
}

// hostList is the -allowed-host flag: names given repeatedly or separated
// by commas.
type hostList []string

func (h *hostList) String() string { return strings.Join(*h, ",") }

func (h *hostList) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*h = append(*h, name)
		}
	}
	return nil
}
