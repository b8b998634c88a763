package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "loadgen" {
		os.Exit(runLoadgen(ctx, os.Args[2:], os.Stdout, os.Stderr))
	}
	if args := upcastCheckArgs(os.Args[1:]); args != nil {
		os.Exit(runCheckEvents(ctx, args, os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(runServer(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// runServer is the default command: it parses flags (getenv reads
// SCRIBE_DATABASE_URL), serves the bank API until ctx ends (SIGINT or
// SIGTERM), shuts down gracefully and returns the exit code.
func runServer(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bank", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host, _ := os.Hostname()
	if host == "" {
		host = "bank"
	}
	var cfg serverConfig
	var logLevel string
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "HTTP listen address")
	fs.StringVar(&cfg.DatabaseURL, "db", "", "Postgres URL, e.g. postgres://user@localhost:5432/bank?sslmode=disable (default $SCRIBE_DATABASE_URL); empty runs on the in-memory journal")
	fs.StringVar(&cfg.Schema, "schema", "scribe", "Postgres schema of Scribe's tables")
	fs.StringVar(&cfg.KeysDatabaseURL, "keys-db", "", "Postgres URL of the customers' key store (erasure), schema \"<schema>_keys\", to back up keys apart from events (default $SCRIBE_KEYS_DATABASE_URL, else the -db database)")
	fs.StringVar(&cfg.NodeID, "node", host, "node ID, stable across restarts (a restarted node takes over its streams at once)")
	fs.BoolVar(&cfg.OtelStdout, "otel-stdout", false, "export OpenTelemetry traces and metrics to stdout (OTLP is used when OTEL_EXPORTER_OTLP_ENDPOINT is set)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful shutdown may take")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug (one line per request), info, warn or error")
	fs.IntVar(&cfg.MaxInFlight, "max-inflight", defaultMaxInFlight, "requests served at once; more answer 503 overloaded with Retry-After (health checks aside)")
	fs.StringVar(&cfg.SecondDatabaseURL, "db2", "", "a second Postgres URL: accounts whose IDs start with \"<partition2>-\" live in partition -partition2 on it, the others on -db (transfers stay within a partition); empty: one database")
	fs.StringVar(&cfg.SecondPartition, "partition2", defaultSecondPartition, "the partition stored on -db2")
	clusterF := addClusterFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bank [flags]               serve the bank API\n       bank loadgen [flags]       drive load against a running bank (bank loadgen -h)\n       bank upcast check [flags]  check that every stored event decodes with this build (bank upcast check -h)\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bank: unexpected argument %q (the subcommands are loadgen and upcast check)\n", fs.Arg(0))
		return 2
	}
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = getenv("SCRIBE_DATABASE_URL")
	}
	if cfg.KeysDatabaseURL == "" {
		cfg.KeysDatabaseURL = getenv("SCRIBE_KEYS_DATABASE_URL")
	}
	if cfg.KeysDatabaseURL != "" && cfg.DatabaseURL == "" {
		fmt.Fprintln(stderr, "bank: -keys-db (or SCRIBE_KEYS_DATABASE_URL) is set without -db (or SCRIBE_DATABASE_URL): the in-memory journal keeps its keys in memory; give -db too, or drop -keys-db")
		return 2
	}
	var err error
	if cfg.Cluster, cfg.SessionTimeout, err = clusterF.config(); err != nil {
		fmt.Fprintf(stderr, "bank: %v\n", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(logLevel))); err != nil {
		fmt.Fprintf(stderr, "bank: -log-level %q: use debug, info, warn or error\n", logLevel)
		return 2
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.TelemetryOut = stdout

	srv, err := startServer(ctx, cfg)
	if err != nil {
		cfg.Logger.Error("start failed", "err", err)
		return 1
	}
	code := 0
	select {
	case <-ctx.Done():
		cfg.Logger.Info("shutting down: stop accepting, finish in-flight requests, passivate actors")
	case err := <-srv.Failed():
		cfg.Logger.Error("server failed", "err", err)
		code = 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		cfg.Logger.Error("shutdown incomplete", "err", err)
		return 1
	}
	cfg.Logger.Info("stopped")
	return code
}
