package main

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

// runCheckEvents is `bank check-events`: the read check before a deploy.
// It decodes every stored event (or a sample per type and version) with
// this build's registrations and upcasters (runtime.CheckStored), prints a
// table by type and version, and exits 1 when any event does not decode,
// naming the first one of each failing type and version. It migrates
// nothing (the schema must be this build's, postgres.WithVerifyOnly) and
// writes only its node session.
func runCheckEvents(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bank check-events", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", "", "Postgres URL of the bank's events (default $SCRIBE_DATABASE_URL)")
	schema := fs.String("schema", "scribe", "Postgres schema of Scribe's tables")
	keysDB := fs.String("keys-db", "", "Postgres URL of the key store when it is not the -db database (default $SCRIBE_KEYS_DATABASE_URL)")
	sample := fs.Uint64("sample", 0, "decode at most this many events per type and version (0: every event)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *db == "" {
		*db = getenv("SCRIBE_DATABASE_URL")
	}
	if *keysDB == "" {
		*keysDB = getenv("SCRIBE_KEYS_DATABASE_URL")
	}
	if *db == "" {
		fmt.Fprintln(stderr, "bank check-events: no database: give -db or $SCRIBE_DATABASE_URL (the in-memory journal holds nothing to check)")
		return 2
	}
	opts := []postgres.Option{postgres.WithSchema(*schema), postgres.WithVerifyOnly(), postgres.WithKeyStore(postgres.KeyStoreConfig{})}
	if *keysDB != "" {
		opts = append(opts, postgres.WithKeyStoreURL(*keysDB))
	}
	store, err := postgres.Open(ctx, *db, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "bank check-events: %v\n", err)
		return 2
	}
	defer store.Close()
	host, _ := os.Hostname()
	rt, err := runtime.New(ctx, runtime.Config{Journal: store.Journal, KeyStore: store.Keys, NodeID: fmt.Sprintf("check-events-%s-%d", host, os.Getpid())})
	if err != nil {
		fmt.Fprintf(stderr, "bank check-events: %v\n", err)
		return 2
	}
	defer func() { _ = rt.Shutdown(context.Background()) }()
	if err := register(rt); err != nil {
		fmt.Fprintf(stderr, "bank check-events: %v\n", err)
		return 2
	}
	check, err := runtime.CheckStored(ctx, rt, runtime.SamplePerVersion(*sample))
	if err != nil {
		fmt.Fprintf(stderr, "bank check-events: %v\n", err)
		return 2
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
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
		fmt.Fprintf(stderr, "bank check-events: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "\n%d events checked of %d: every one decodes with this build\n", check.Checked, check.Events)
	return 0
}
