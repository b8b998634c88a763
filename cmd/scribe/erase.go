package main

import (
	"cmp"
	"flag"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/postgres"
)

// EnvKeySchema names the environment variable read when -keys is not given.
const EnvKeySchema = "SCRIBE_KEY_SCHEMA"

// EnvKeysDatabaseURL names the environment variable read when -keys-db is
// not given.
const EnvKeysDatabaseURL = "SCRIBE_KEYS_DATABASE_URL"

// keySchemaFlag registers -keys on fs. Its default, "<schema>_keys"
// (postgres.KeyStoreSchemaFor the journal's -schema: "scribe_keys" beside
// "scribe"), is the schema postgres.Open's Config.KeyStore and the bank
// example create, so every tool finds the same keys.
func keySchemaFlag(fs *flag.FlagSet, v *string) {
	fs.StringVar(v, "keys", "", "Postgres schema of the erasure key store (default $"+EnvKeySchema+", else \"<-schema>_keys\": "+postgres.DefaultKeyStoreSchema+" beside the default schema)")
}

// keysDBFlag registers -keys-db on fs.
func keysDBFlag(fs *flag.FlagSet, v *string) {
	fs.StringVar(v, "keys-db", "", "Postgres URL of the key store's database when it is not the journal's (default $"+EnvKeysDatabaseURL+", else the -db database)")
}

// keyStoreConfig returns the key store's config from -keys or the
// environment, else postgres.KeyStoreSchemaFor the journal's schema.
func (e *env) keyStoreConfig(flagValue string) postgres.KeyStoreConfig {
	if flagValue == "" {
		flagValue = e.opts.getenv(EnvKeySchema)
	}
	if flagValue == "" {
		flagValue = postgres.KeyStoreSchemaFor(e.opts.schema)
	}
	return postgres.KeyStoreConfig{Schema: flagValue}
}

// keysPool returns the pool of the key store's database: a new pool on
// -keys-db (or $SCRIBE_KEYS_DATABASE_URL) when given, else journalPool. The
// returned func closes the pool it opened (a no-op otherwise).
func (e *env) keysPool(journalPool *pgxpool.Pool, keysDB string) (*pgxpool.Pool, func(), error) {
	if keysDB == "" {
		keysDB = e.opts.getenv(EnvKeysDatabaseURL)
	}
	if keysDB == "" {
		return journalPool, func() {}, nil
	}
	if _, err := pgxpool.ParseConfig(keysDB); err != nil {
		return nil, nil, usagef("the key store's database URL is not valid (%v); give -keys-db or $%s as a URL such as postgres://user@host:5432/keys?sslmode=disable", err, EnvKeysDatabaseURL)
	}
	pool, err := postgres.Connect(e.ctx, keysDB, postgres.Config{MaxConns: 4})
	if err != nil {
		return nil, nil, fmt.Errorf("the key store's database: %w; check -keys-db or %s", err, EnvKeysDatabaseURL)
	}
	return pool, pool.Close, nil
}

// openKeyStore opens the key store on s's pool, or on -keys-db's database
// (keysDB), after checking that its schema is migrated. Call the returned
// func when done.
func (e *env) openKeyStore(s *store, cfg postgres.KeyStoreConfig, keysDB string) (*postgres.KeyStore, func(), error) {
	pool, closeKeys, err := e.keysPool(s.pool, keysDB)
	if err != nil {
		return nil, nil, err
	}
	ks, err := postgres.NewKeyStore(pool, cfg)
	if err != nil {
		closeKeys()
		return nil, nil, err
	}
	exists, err := e.keyStoreExistsOn(pool, cfg)
	if err != nil {
		closeKeys()
		return nil, nil, err
	}
	if !exists {
		closeKeys()
		schema := cmp.Or(cfg.Schema, postgres.DefaultKeyStoreSchema)
		return nil, nil, fmt.Errorf("%w: the key store is missing from schema %q (not an erasure): restore it from its backup, name it with -keys/$%s and -keys-db/$SCRIBE_KEYS_DATABASE_URL, or create one: scribe migrate keys -keys %s", erasure.ErrKeyStoreUnavailable, schema, EnvKeySchema, schema)
	}
	return ks, closeKeys, nil
}

// keyStoreExistsOn reports whether cfg's schema on pool's database holds
// a migrated key store.
func (e *env) keyStoreExistsOn(pool *pgxpool.Pool, cfg postgres.KeyStoreConfig) (bool, error) {
	schema := cmp.Or(cfg.Schema, postgres.DefaultKeyStoreSchema)
	var exists bool
	if err := pool.QueryRow(e.ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{schema, "subjects"}.Sanitize()).Scan(&exists); err != nil {
		return false, fmt.Errorf("checking the key store schema %q: %w", schema, err)
	}
	return exists, nil
}

func eraseCommand() *command {
	var by, keys, keysDB string
	var confirm, recorded bool
	return &command{
		name: "erase",
		args: "SUBJECT | -recorded",
		summary: "crypto-shred a data subject: record the erasure as pending, append its record to the journal, destroy its key, drop its snapshots, record it complete; " +
			"with -recorded, erase again every subject the journal records erased but a restored key store does not",
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&confirm, "confirm", false, "really erase (without it, say what would happen and change nothing)")
			fs.StringVar(&by, "by", "", "who asks for the erasure, stored with it (default $USER, else \"scribe-cli\")")
			keySchemaFlag(fs, &keys)
			keysDBFlag(fs, &keysDB)
			fs.BoolVar(&recorded, "recorded", false, "instead of one subject, erase again in the key store every subject whose erasure the journal records "+
				"but the key store does not know (run it after restoring the key store from a backup)")
		},
		run: func(e *env, fs *flag.FlagSet, args []string) error {
			if recorded {
				if len(args) > 0 {
					return usagef("-recorded erases the subjects the journal records; give no subject ID")
				}
				return eraseRecorded(e, keys, keysDB, confirm)
			}
			if len(args) == 0 {
				return usagef("give exactly one subject ID")
			}
			subject := args[0]
			// Flags may follow the subject: scribe erase c-42 -confirm.
			if err := fs.Parse(args[1:]); err != nil {
				return usagef("%v", err)
			}
			if fs.NArg() > 0 {
				return usagef("unexpected argument %q; give exactly one subject ID", fs.Arg(0))
			}
			if recorded {
				return usagef("-recorded erases the subjects the journal records; give no subject ID")
			}
			if err := erasure.ValidateSubject(subject); err != nil {
				return usagef("%v", err)
			}
			if by == "" {
				by = e.opts.getenv("USER")
			}
			if by == "" {
				by = "scribe-cli"
			}
			if err := erasure.ValidateBy(by); err != nil {
				return usagef("-by: %v", err)
			}
			s, snaps, err := e.openSnapshots()
			if err != nil {
				return err
			}
			defer s.Close()
			kcfg := e.keyStoreConfig(keys)
			ks, closeKeys, err := e.openKeyStore(s, kcfg, keysDB)
			if err != nil {
				return err
			}
			defer closeKeys()
			streams, err := ks.Streams(e.ctx, subject)
			if err != nil {
				return err
			}
			look, err := ks.Lookup(e.ctx, []string{subject})
			if err != nil {
				return err
			}
			if !confirm {
				state := "has a data key"
				if er, ok := look.Erased[subject]; ok && er.State == erasure.ErasureComplete {
					state = fmt.Sprintf("is already erased (at %s by %q); erasing again changes nothing", fmtTime(er.At), er.By)
				} else if ok {
					state = fmt.Sprintf("has an erasure pending since %s by %q (%s); erasing again completes it", fmtTime(er.At), er.By, er.State)
				} else if _, ok := look.Keys[subject]; !ok {
					state = "is unknown to the key store; erasing it records an erasure so that no personal data can ever be stored for it"
				}
				fmt.Fprintf(e.stderr, "scribe erase: not erasing without -confirm. Subject %q %s.\n", subject, state)
				fmt.Fprintf(e.stderr, "With -confirm, scribe erase would: record the erasure as pending in key store schema %q (from then on its key is refused everywhere and running services drop the subject's in-memory state within a second; no undo),\n", cmp.Or(kcfg.Schema, postgres.DefaultKeyStoreSchema))
				fmt.Fprintf(e.stderr, "append the erasure record to the journal in schema %q, destroy the subject's data key (its personal fields become unreadable for good),\n", s.cfg.Schema)
				fmt.Fprintf(e.stderr, "delete the snapshots of the %d stream(s) holding its data, and record the erasure complete. If it stops midway, a running service's sweep completes it.\n", len(streams))
				return errFailed
			}
			er, err := erasure.Erase(e.ctx, erasure.EraseParams{Journal: s.journal, KeyStore: ks, Snapshots: snaps, Subject: subject, By: by})
			if err != nil {
				return err
			}
			if e.opts.json {
				return emitJSON(e.stdout, map[string]any{"subject": er.Subject, "by": er.By, "erasedAt": jsonTime(er.At), "repeat": er.Repeat, "streams": len(streams)})
			}
			if er.Repeat {
				fmt.Fprintf(e.stdout, "subject %q was already erased at %s by %q; every step of the erasure is done\n", er.Subject, fmtTime(er.At), er.By)
				return nil
			}
			fmt.Fprintf(e.stdout, "subject %q erased at %s by %q: erasure recorded in the journal, key destroyed, snapshots of %d stream(s) deleted; complete\n", er.Subject, fmtTime(er.At), er.By, len(streams))
			return nil
		},
	}
}

func subjectsCommand() *command {
	var keys, keysDB, after string
	var limit int
	return &command{
		name:    "subjects",
		summary: "list the data subjects of the erasure key store and whether each is erased, pending or not (never any key)",
		flags: func(fs *flag.FlagSet) {
			keySchemaFlag(fs, &keys)
			keysDBFlag(fs, &keysDB)
			fs.StringVar(&after, "after", "", "list subjects whose ID sorts after this one")
			fs.IntVar(&limit, "limit", 1000, "list at most this many subjects (0: all)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if limit < 0 {
				return usagef("-limit %d is negative", limit)
			}
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			ks, closeKeys, err := e.openKeyStore(s, e.keyStoreConfig(keys), keysDB)
			if err != nil {
				return err
			}
			defer closeKeys()
			subs, err := ks.Subjects(e.ctx, after, limit)
			if err != nil {
				return err
			}
			if e.opts.json {
				for _, sub := range subs {
					// "erased" is true only once every step is done; "erasure"
					// names the state (no, pending, key destroyed, complete).
					if err := emitJSON(e.stdout, map[string]any{"subject": sub.ID, "createdAt": jsonTime(sub.CreatedAt), "erased": sub.Erasure == erasure.ErasureComplete,
						"erasure": sub.Erasure.String(), "erasedAt": jsonTime(sub.ErasedAt), "erasedBy": sub.ErasedBy}); err != nil {
						return err
					}
				}
				return nil
			}
			// ERASED says yes only once every step is done; a begun erasure
			// shows "pending" (key refused, still stored) or "pending (key
			// destroyed)" until a runtime's sweep or a repeated `scribe
			// erase` completes it.
			t := newTable(e.stdout, "SUBJECT", "CREATED", "ERASED", "ERASED AT", "ERASED BY")
			pending := 0
			for _, sub := range subs {
				erased, erasedBy := "no", "-"
				switch sub.Erasure {
				case erasure.ErasureComplete:
					erased, erasedBy = "yes", sub.ErasedBy
				case erasure.ErasurePending:
					erased, erasedBy = "pending", sub.ErasedBy
					pending++
				case erasure.ErasureKeyDestroyed:
					erased, erasedBy = "pending (key destroyed)", sub.ErasedBy
					pending++
				}
				t.row(sub.ID, fmtTime(sub.CreatedAt), erased, fmtTime(sub.ErasedAt), erasedBy)
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "\n%d subjects\n", len(subs))
			if pending > 0 {
				fmt.Fprintf(e.stdout, "%d erasure(s) pending: a running service completes them at its next sweep, or run `scribe erase SUBJECT -confirm` again\n", pending)
			}
			return nil
		},
	}
}

func migrateKeysCommand() *command {
	var keys, keysDB string
	return &command{
		name:    "migrate keys",
		summary: "create or upgrade the erasure key store's tables (in their own schema, -keys, on -db's database or -keys-db's)",
		flags: func(fs *flag.FlagSet) {
			keySchemaFlag(fs, &keys)
			keysDBFlag(fs, &keysDB)
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if keysDB == "" {
				keysDB = e.opts.getenv(EnvKeysDatabaseURL)
			}
			kcfg := e.keyStoreConfig(keys)
			if keysDB != "" {
				pool, closeKeys, err := e.keysPool(nil, keysDB)
				if err != nil {
					return err
				}
				defer closeKeys()
				if err := postgres.MigrateKeyStore(e.ctx, pool, kcfg); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "key store schema %s at %s is up to date\n", kcfg.Schema, postgres.Address(pool.Config().ConnConfig))
				return nil
			}
			pool, cfg, err := e.connect()
			if err != nil {
				return err
			}
			defer pool.Close()
			if cmp.Or(kcfg.Schema, postgres.DefaultKeyStoreSchema) == cfg.Schema {
				return usagef("the key store schema %q is the journal's schema; keep keys in a schema of their own (a dump of the journal must hold no key)", cfg.Schema)
			}
			if err := postgres.MigrateKeyStore(e.ctx, pool, kcfg); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "key store schema %s is up to date\n", cmp.Or(kcfg.Schema, postgres.DefaultKeyStoreSchema))
			return nil
		},
	}
}
