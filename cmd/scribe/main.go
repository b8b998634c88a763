package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

// Environment variables read when the matching flag is not given.
const (
	EnvDatabaseURL = "SCRIBE_DATABASE_URL" // -db
	EnvSchema      = "SCRIBE_SCHEMA"       // -schema
)

// defaultSchema is postgres.Config's default schema.
const defaultSchema = "scribe"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // the command failed, or verify found a broken chain
	exitUsage   = 2
)

// usageError is a mistake in the command line: run prints it with the usage
// of the command and exits with status 2.
type usageError struct {
	msg   string
	usage func()
}

func (e *usageError) Error() string { return e.msg }

// errFailed is returned by a command that already reported why it failed
// (verify found a broken chain): run exits with status 1 without another
// message.
var errFailed = errors.New("failed")

// env is what a command runs with.
type env struct {
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
	opts   *options
}

// options are the flags every command takes.
type options struct {
	db     string
	schema string
	json   bool
	getenv func(string) string
}

// register adds the common flags to fs, defaulting to o's current values (so
// flags given before the command carry over).
func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.db, "db", o.db, "Postgres connection URL (default $"+EnvDatabaseURL+")")
	fs.StringVar(&o.schema, "schema", o.schema, "Postgres schema holding Scribe's tables (default $"+EnvSchema+", else "+defaultSchema+")")
	fs.BoolVar(&o.json, "json", o.json, "print one JSON object per line instead of a table")
}

// command is one subcommand.
type command struct {
	name    string
	args    string // synopsis of the arguments after the flags
	summary string
	run     func(e *env, fs *flag.FlagSet, args []string) error
	// flags registers the command's own flags; parse is done by dispatch.
	flags func(fs *flag.FlagSet)
}

// commands lists every subcommand, in the order help shows them. Two-word
// commands ("migrate up") are matched on both words.
func commands() []*command {
	return []*command{
		migrateUpCommand(),
		migrateStatusCommand(),
		migrateSQLCommand(),
		migrateKeysCommand(),
		streamsListCommand(),
		streamShowCommand(),
		tailCommand(),
		eventsCommand(),
		eventCommand(),
		correlationCommand(),
		typesCommand(),
		upcastCheckCommand(),
		verifyCommand(),
		checkpointKeygenCommand(),
		checkpointCommand(),
		proofCommand(),
		verifyProofCommand(),
		archiveCommand(),
		retireStreamCommand(),
		leasesCommand(),
		partitionMoveCommand(),
		snapshotsListCommand(),
		snapshotsPruneCommand(),
		snapshotsDropCommand(),
		tagsCommand(),
		projectionsStatusCommand(),
		projectionsRebuildCommand(),
		pauseCommand(true),
		pauseCommand(false),
		deadLettersListCommand(),
		deadLettersReplayCommand(),
		eraseCommand(),
		subjectsCommand(),
		consoleCommand(),
		rolesSQLCommand(),
	}
}

// run executes the command line args (without the program name), writing
// results to stdout and diagnostics to stderr, and returns the exit status.
// It ends when ctx does (tail runs until then).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, stdout, stderr, os.Getenv)
}

// runWith is run with getenv in place of os.Getenv.
func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	schema := defaultSchema
	if v := getenv(EnvSchema); v != "" {
		schema = v
	}
	opts := &options{schema: schema, getenv: getenv}
	top := flag.NewFlagSet("scribe", flag.ContinueOnError)
	top.SetOutput(stderr)
	opts.register(top)
	cmds := commands()
	top.Usage = func() { topUsage(stderr, top, cmds) }
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	rest := top.Args()
	if len(rest) == 0 || rest[0] == "help" {
		top.Usage()
		if len(rest) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, n := find(cmds, rest)
	if cmd == nil {
		if group, sub := findGroup(cmds, rest); len(sub) > 0 {
			help := len(rest) > len(strings.Fields(group)) && isHelpFlag(rest[len(strings.Fields(group))])
			if !help && len(rest) > len(strings.Fields(group)) {
				fmt.Fprintf(stderr, "scribe: unknown command %q\n", strings.Join(rest[:len(strings.Fields(group))+1], " "))
			}
			groupUsage(stderr, group, sub)
			if help {
				return exitOK
			}
			return exitUsage
		}
		fmt.Fprintf(stderr, "scribe: unknown command %q; run `scribe help` for the list of commands\n", strings.Join(rest[:min(len(rest), 2)], " "))
		return exitUsage
	}
	fs := flag.NewFlagSet("scribe "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts.register(fs)
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: scribe %s [flags] %s\n\n%s\n\nflags:\n", cmd.name, cmd.args, cmd.summary)
		fs.PrintDefaults()
	}
	if err := fs.Parse(rest[n:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	e := &env{ctx: ctx, stdout: stdout, stderr: stderr, opts: opts}
	err := cmd.run(e, fs, fs.Args())
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "scribe %s: %s\n", cmd.name, ue.msg)
		fs.Usage()
		return exitUsage
	case errors.Is(err, errFailed):
		return exitFailure
	default:
		fmt.Fprintf(stderr, "scribe %s: %v\n", cmd.name, privilegeHint(cmd.name, err))
		return exitFailure
	}
}

// find returns the command named by the first one or two words of args and
// how many words it used.
func find(cmds []*command, args []string) (*command, int) {
	for _, c := range cmds {
		words := strings.Fields(c.name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == c.name {
			return c, len(words)
		}
	}
	return nil, 0
}

// findGroup returns the longest run of leading words of args that starts
// the names of several commands ("migrate", "projections dead-letters") and
// those commands; none when args names no group.
func findGroup(cmds []*command, args []string) (string, []*command) {
	for n := len(args); n > 0; n-- {
		prefix := strings.Join(args[:n], " ") + " "
		var sub []*command
		for _, c := range cmds {
			if strings.HasPrefix(c.name, prefix) {
				sub = append(sub, c)
			}
		}
		if len(sub) > 0 {
			return strings.TrimSpace(prefix), sub
		}
	}
	return "", nil
}

func isHelpFlag(a string) bool {
	return a == "-h" || a == "-help" || a == "--help" || a == "help"
}

// groupUsage lists the commands of a group ("scribe migrate -h").
func groupUsage(w io.Writer, group string, sub []*command) {
	fmt.Fprintf(w, "usage: scribe %s <command> [flags] [arguments]\n\ncommands:\n", group)
	for _, c := range sub {
		fmt.Fprintf(w, "  %-31s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun `scribe %s <command> -h` for a command's flags.\n", group)
}

func topUsage(w io.Writer, top *flag.FlagSet, cmds []*command) {
	fmt.Fprintf(w, "usage: scribe [flags] <command> [command flags] [arguments]\n\ncommands:\n")
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-31s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nflags (also accepted after the command):\n")
	top.PrintDefaults()
	fmt.Fprintf(w, "\nRun `scribe <command> -h` for a command's flags.\n")
}

// usagef returns a usage error.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// noArgs fails with a usage error when args is not empty.
func noArgs(args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q (flags go before arguments)", args[0])
	}
	return nil
}

// store is an open connection to a Scribe schema.
type store struct {
	pool    *pgxpool.Pool
	cfg     postgres.Config
	journal *postgres.Journal
	admin   *pgadmin.Admin
}

// Close closes the journal and the pool.
func (s *store) Close() {
	if s.journal != nil {
		_ = s.journal.Close()
	}
	s.pool.Close()
}

// connect opens a pool on the -db URL (or $SCRIBE_DATABASE_URL) and checks
// that it reaches the database.
func (e *env) connect() (*pgxpool.Pool, postgres.Config, error) {
	url := e.opts.db
	if url == "" {
		url = e.opts.getenv(EnvDatabaseURL)
	}
	if url == "" {
		return nil, postgres.Config{}, usagef("no database given; pass -db postgres://user@host:5432/db or set %s", EnvDatabaseURL)
	}
	if _, err := pgxpool.ParseConfig(url); err != nil {
		return nil, postgres.Config{}, usagef("the database URL is not valid (%v); give a URL such as postgres://user@host:5432/db?sslmode=disable", err)
	}
	// Connect's errors name the database (never the password) and say
	// whether it was not reached, refused the credentials or does not exist.
	pool, err := postgres.Connect(e.ctx, url, postgres.Config{MaxConns: 4})
	if err != nil {
		return nil, postgres.Config{}, fmt.Errorf("%w; check -db or %s", err, EnvDatabaseURL)
	}
	return pool, postgres.Config{Schema: e.opts.schema}, nil
}

// open connects and opens the journal, after checking that the schema is
// migrated by this build or an older one whose tables this build reads.
func (e *env) open() (*store, error) {
	pool, cfg, err := e.connect()
	if err != nil {
		return nil, err
	}
	rep, err := postgres.MigrationStatus(e.ctx, pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	switch {
	case rep.Current == 0:
		pool.Close()
		return nil, fmt.Errorf("schema %q has no Scribe tables; run `scribe migrate up` to create them, or pass the schema your service uses with -schema", cfg.Schema)
	case rep.TooNew():
		pool.Close()
		return nil, tooNew(rep)
	case len(rep.Pending) > 0:
		fmt.Fprintf(e.stderr, "scribe: warning: schema %q is at version %d, this scribe knows version %d; run `scribe migrate up` when the services are upgraded\n", cfg.Schema, rep.Current, rep.Latest)
	}
	j, err := postgres.NewJournal(pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	a, err := pgadmin.New(pool, cfg)
	if err != nil {
		_ = j.Close()
		pool.Close()
		return nil, err
	}
	return &store{pool: pool, cfg: cfg, journal: j, admin: a}, nil
}

func tooNew(rep postgres.MigrationReport) error {
	return fmt.Errorf("schema %q is at version %d, newer than this scribe knows (%d); use the scribe command of the release that migrated it (go run ./cmd/scribe in its checkout)", rep.Schema, rep.Current, rep.Latest)
}
