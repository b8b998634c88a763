package scribe

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/runtime"
)

// UpcastCheckParams are the inputs of UpcastCheck.
type UpcastCheckParams struct {
	// Name is the command as the service's users type it, for usage and
	// messages (e.g. "bank upcast check"). Default "upcast check".
	Name string
	// Args are the command line arguments after the command's name.
	Args []string
	// Register registers the service's event types and upcasters (and may
	// register its aggregates) on a runtime, as the service does. Required.
	Register func(*runtime.Runtime) error
	// Getenv reads $SCRIBE_DATABASE_URL and $SCRIBE_KEYS_DATABASE_URL when
	// the flags do not give them. Default os.Getenv.
	Getenv func(string) string
	// Stdout receives the table, Stderr usage and failures. Defaults: the
	// process's.
	Stdout, Stderr io.Writer
}

// UpcastCheck is the read check before a deploy as a subcommand of the
// service's own binary, for the service's registrations are in its code,
// not in the scribe command: every stored event (or a sample per type and
// version, -sample N) is decoded with the registrations and upcasters of
// p.Register (runtime.CheckStored), a table by type and version is printed,
// and the exit status is 0 when every checked event decodes, 1 when any
// does not (stderr names each failing type and version with its first
// event ID), 2 on a usage error or when the database cannot be read. Flags:
// -db, -schema, -keys-db, -sample. It migrates nothing (the schema must be
// this build's, postgres.Config.VerifyOnly), does not record the build's types
// (it never calls Runtime.Start) and writes only its node session.
func UpcastCheck(ctx context.Context, p UpcastCheckParams) int {
	if p.Name == "" {
		p.Name = "upcast check"
	}
	if p.Getenv == nil {
		p.Getenv = os.Getenv
	}
	if p.Stdout == nil {
		p.Stdout = os.Stdout
	}
	if p.Stderr == nil {
		p.Stderr = os.Stderr
	}
	fs := flag.NewFlagSet(p.Name, flag.ContinueOnError)
	fs.SetOutput(p.Stderr)
	db := fs.String("db", "", "Postgres URL of the service's events (default $SCRIBE_DATABASE_URL)")
	schema := fs.String("schema", "scribe", "Postgres schema of Scribe's tables")
	keysDB := fs.String("keys-db", "", "Postgres URL of the key store when it is not the -db database (default $SCRIBE_KEYS_DATABASE_URL)")
	sample := fs.Uint64("sample", 0, "decode at most this many events per type and version, the oldest (0: every event)")
	if err := fs.Parse(p.Args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(p.Stderr, "%s: %v\n", p.Name, err)
		return code
	}
	switch {
	case p.Register == nil:
		return fail(2, errors.New("UpcastCheckParams.Register is nil; pass the function registering the service's events and upcasters"))
	case fs.NArg() > 0:
		return fail(2, fmt.Errorf("unexpected argument %q (flags go before arguments)", fs.Arg(0)))
	}
	if *db == "" {
		*db = p.Getenv("SCRIBE_DATABASE_URL")
	}
	if *keysDB == "" {
		*keysDB = p.Getenv("SCRIBE_KEYS_DATABASE_URL")
	}
	if *db == "" {
		return fail(2, errors.New("no database: give -db or $SCRIBE_DATABASE_URL (the in-memory journal holds nothing to check)"))
	}
	store, err := postgres.Open(ctx, *db, postgres.Config{Schema: *schema, VerifyOnly: true,
		KeyStore: &postgres.KeyStoreConfig{}, KeyStoreURL: *keysDB})
	if err != nil {
		return fail(2, err)
	}
	defer store.Close()
	host, _ := os.Hostname()
	rt, err := runtime.New(ctx, runtime.Config{Journal: store.Journal, KeyStore: store.Keys, NodeID: fmt.Sprintf("upcast-check-%s-%d", host, os.Getpid())})
	if err != nil {
		return fail(2, err)
	}
	defer func() { _ = rt.Shutdown(context.WithoutCancel(ctx)) }()
	if err := p.Register(rt); err != nil {
		return fail(2, err)
	}
	check, err := runtime.CheckStored(ctx, rt, runtime.SamplePerVersion(*sample))
	if err != nil {
		return fail(2, err)
	}
	tw := tabwriter.NewWriter(p.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tVERSION\tEVENTS\tCHECKED\tFAILED\tFIRST FAILURE")
	for _, t := range check.Types {
		first := ""
		if t.FirstFailure != nil {
			first = fmt.Sprintf("%s at %s", t.FirstFailure.EventID, t.FirstFailure.Position)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", t.Type, t.SchemaVersion, t.Events, t.Checked, t.Failed, first)
	}
	_ = tw.Flush()
	if err := check.Err(); err != nil {
		return fail(1, err)
	}
	fmt.Fprintf(p.Stdout, "\n%d events checked of %d: every one decodes with this build\n", check.Checked, check.Events)
	return 0
}
