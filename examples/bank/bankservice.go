package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// bankServiceConfig configures the Scribe-backed service.
type bankServiceConfig struct {
	Backend        *backend
	NodeID         string
	Logger         *slog.Logger
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	Cluster        runtime.Cluster
	SessionTimeout time.Duration
}

// bankService implements Service on the Scribe runtime: each account is an
// aggregate whose stream is the tag "account:<id>", decided by its single
// stream actor; transfers are DCB commands over the two accounts' tags.
type bankService struct {
	rt       *runtime.Runtime
	transfer transferCommand
	journal  journal.Journal
	keys     erasure.KeyStore
	log      *slog.Logger
	db       *dbProbe
	parts    accountPartitions
}

var _ Service = (*bankService)(nil)

// readAccount is the service's query command: Decide returns no events, so
// executing it returns the account's confirmed state and version through
// its actor, consistent with every acknowledged command.
type readAccount struct{}

// newBankService starts a runtime on the backend and registers the account
// aggregate and the bank's event types.
func newBankService(ctx context.Context, cfg bankServiceConfig) (*bankService, error) {
	rt, err := runtime.New(ctx, runtime.Config{
		Journal:        cfg.Backend.Journal,
		Sessions:       cfg.Backend.Sessions,
		Snapshots:      cfg.Backend.Snapshots,
		NodeID:         cfg.NodeID,
		Logger:         cfg.Logger,
		TracerProvider: cfg.TracerProvider,
		MeterProvider:  cfg.MeterProvider,
		Cluster:        cfg.Cluster,
		Bounds:         runtime.Bounds{SessionTimeout: cfg.SessionTimeout},
		KeyStore:       cfg.Backend.KeyStore,
	})
	if err != nil {
		return nil, fmt.Errorf("start the Scribe runtime: %w", err)
	}
	if err := register(rt); err != nil {
		_ = rt.Shutdown(ctx)
		return nil, err
	}
	transfer, err := registerTransfer(rt, cfg.Backend.partitions)
	if err != nil {
		_ = rt.Shutdown(ctx)
		return nil, err
	}
	// Record the bank's event types and shapes, and refuse to serve a
	// database holding an event version this build cannot read.
	if err := rt.Start(ctx); err != nil {
		_ = rt.Shutdown(ctx)
		return nil, fmt.Errorf("check the stored event types: %w", err)
	}
	return &bankService{rt: rt, transfer: transfer, journal: cfg.Backend.Journal, keys: cfg.Backend.KeyStore, log: cfg.Logger, db: &dbProbe{journal: cfg.Backend.Journal}, parts: cfg.Backend.partitions}, nil
}

// Ready reports why this node cannot serve now, nil when it can: the
// runtime's own state (node session confirmed, node ID not taken by a twin,
// not fenced), then whether the database answers (a cached probe).
func (s *bankService) Ready(ctx context.Context) error {
	if err := s.rt.Ready(); err != nil {
		return err
	}
	return s.db.check(ctx)
}

// rewindNoteFor is how long /readyz reports a store rewind (status
// "degraded") after the runtime last detected one.
const rewindNoteFor = 15 * time.Minute

// Degraded returns /readyz's note while the runtime found, less than
// rewindNoteFor ago, streams behind what it had acknowledged; "" otherwise.
func (s *bankService) Degraded() string {
	sum := s.rt.Rewinds()
	if sum.Streams == 0 || time.Since(sum.Last.DetectedAt) > rewindNoteFor {
		return ""
	}
	last := sum.Last
	return fmt.Sprintf("the database lost acknowledged events (an asynchronous standby was promoted or a backup restored): %d stream(s), %d version(s) since start; latest %s at %s, versions %d..%d lost; the streams were reloaded and serve the database's state; see the ERROR logs",
		sum.Streams, sum.LostVersions, last.Stream, last.DetectedAt.UTC().Format(time.RFC3339), last.Found+1, last.Known)
}

// dbProbeEvery bounds how often /readyz touches the database while it
// answers: a successful probe is reused for this long, so a flood of
// readiness checks costs one query per period. A failed probe is reused for
// dbProbeRetry only, so /readyz turns 200 within that of the database
// answering again (a restart, a failover) instead of lagging a full period.
const (
	dbProbeEvery = time.Second
	dbProbeRetry = 100 * time.Millisecond
)

// dbProbeTimeout bounds one probe.
const dbProbeTimeout = time.Second

// dbProbe checks that the database answers (journal Head, one index lookup),
// at most once per dbProbeEvery while it does, once per dbProbeRetry while it
// does not.
type dbProbe struct {
	journal journal.Journal
	mu      sync.Mutex
	at      time.Time
	err     error
}

func (p *dbProbe) check(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	reuse := dbProbeEvery
	if p.err != nil {
		reuse = dbProbeRetry
	}
	if !p.at.IsZero() && time.Since(p.at) < reuse {
		return p.err
	}
	ctx, cancel := context.WithTimeout(ctx, dbProbeTimeout)
	defer cancel()
	if _, err := p.journal.Head(ctx); err != nil {
		p.err = fmt.Errorf("the database does not answer: %w", err)
	} else {
		p.err = nil
	}
	p.at = time.Now()
	return p.err
}

func register(rt *runtime.Runtime) error {
	return errors.Join(
		// The customer's name and email are personal data of the customer
		// (the subject customerId): sealed in the journal, erasable.
		runtime.RegisterEvent[bank.AccountOpened](rt, bank.TypeAccountOpened, 1, runtime.WithPersonalData(runtime.PersonalData{
			Fields:       []string{"customerName", "customerEmail"},
			SubjectField: "customerId",
		})),
		runtime.RegisterEvent[bank.MoneyDeposited](rt, bank.TypeMoneyDeposited, 1),
		runtime.RegisterEvent[bank.MoneyWithdrawn](rt, bank.TypeMoneyWithdrawn, 1),
		runtime.RegisterEvent[bank.MoneyTransferred](rt, bank.TypeMoneyTransferred, 1),
		runtime.RegisterAggregate(rt, runtime.Aggregate[bank.Account]{
			Name:    bank.TagGroupAccount,
			Initial: func() bank.Account { return bank.Account{} },
			Decide:  decideAccount,
			Evolve:  evolveAccount,
		}),
	)
}

func decideAccount(a bank.Account, cmd any) ([]any, error) {
	switch c := cmd.(type) {
	case readAccount:
		return nil, nil
	case bank.Command:
		events, err := bank.Decide(a, c)
		if err != nil {
			return nil, err
		}
		out := make([]any, len(events))
		for i, e := range events {
			out[i] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("bank: unknown account command %T", cmd)
}

func evolveAccount(a bank.Account, e any) bank.Account {
	if be, ok := e.(bank.Event); ok {
		return bank.Evolve(a, be)
	}
	return a
}

// Shutdown passivates every account actor and closes the node session.
func (s *bankService) Shutdown(ctx context.Context) error { return s.rt.Shutdown(ctx) }

// target returns account id's aggregate, in its partition.
func (s *bankService) target(id string) runtime.Target {
	return runtime.Target{Partition: s.parts.of(id), Aggregate: bank.TagGroupAccount, ID: id}
}

func metadata(opts CommandOptions) runtime.ExecuteOption {
	return runtime.WithMetadata(journal.Metadata{IdempotencyKey: opts.IdempotencyKey, CorrelationID: opts.CorrelationID})
}

// execute runs an account command and classifies runtime errors.
func (s *bankService) execute(ctx context.Context, id string, cmd any, opts CommandOptions) (runtime.Result[bank.Account], error) {
	res, err := runtime.ExecuteTyped[bank.Account](ctx, s.rt, s.target(id), cmd, metadata(opts))
	if errors.Is(err, runtime.ErrIdempotencyKeyReused) {
		return res, keyReused(opts.IdempotencyKey)
	}
	return res, classify(err)
}

// keyReused is the error of an idempotency key whose first execution was a
// different command.
func keyReused(key string) error {
	return &bank.Error{Code: codeIdempotencyKeyReused, Message: fmt.Sprintf(
		"Idempotency-Key %q was already used for a different request; use a new key for a new request, and the same key only to retry the identical request", key)}
}

// CreateAccount implements Service.
func (s *bankService) CreateAccount(ctx context.Context, id string, customer *bank.Customer, opts CommandOptions) (AccountView, error) {
	cmd := bank.OpenAccount{AccountID: id}
	if customer != nil {
		cmd.CustomerID, cmd.CustomerName, cmd.CustomerEmail = customer.ID, customer.Name, customer.Email
	}
	res, err := s.execute(ctx, id, cmd, opts)
	if errors.Is(err, erasure.ErrSubjectErased) {
		return AccountView{}, &bank.Error{Code: bank.CodeCustomerErased, Message: fmt.Sprintf(
			"customer %q was erased, so no personal data can be stored for it again; open the account for a new customer ID", customer.ID)}
	}
	if errors.Is(err, bank.ErrAccountExists) {
		// A retired account exists too, but for good: say so.
		if sum, serr := s.journal.TagSummary(ctx, s.stream(id)); serr == nil && sum.Retired {
			return AccountView{}, classify(&journal.StreamRetiredError{Stream: s.stream(id), Version: sum.Version})
		}
	}
	return s.accountResult(ctx, id, res, err, opts, func(e bank.Event) bool {
		_, ok := e.(bank.AccountOpened)
		return ok
	})
}

// Deposit implements Service.
func (s *bankService) Deposit(ctx context.Context, id string, amount int64, opts CommandOptions) (AccountView, error) {
	res, err := s.execute(ctx, id, bank.DepositMoney{AccountID: id, Amount: amount}, opts)
	return s.accountResult(ctx, id, res, err, opts, func(e bank.Event) bool {
		d, ok := e.(bank.MoneyDeposited)
		return ok && d.Amount == amount
	})
}

// Withdraw implements Service.
func (s *bankService) Withdraw(ctx context.Context, id string, amount int64, opts CommandOptions) (AccountView, error) {
	res, err := s.execute(ctx, id, bank.WithdrawMoney{AccountID: id, Amount: amount}, opts)
	return s.accountResult(ctx, id, res, err, opts, func(e bank.Event) bool {
		w, ok := e.(bank.MoneyWithdrawn)
		return ok && w.Amount == amount
	})
}

// accountResult renders a command's result, or its error. A fresh
// execution reports the state right after it. A duplicate (the idempotency
// key was executed before) must be the same command — same is checked on
// its stored event — and reports the state right after the first
// execution, which the runtime rebuilt from the journal (through the
// archive where it has one), so the retry answers exactly like the first
// attempt did. A duplicate whose events are archived, which the runtime
// refuses with journal.ErrArchived without running it again, is answered
// by archivedOutcome.
func (s *bankService) accountResult(ctx context.Context, id string, res runtime.Result[bank.Account], err error, opts CommandOptions, same func(bank.Event) bool) (AccountView, error) {
	if err != nil {
		if opts.IdempotencyKey != "" && errors.Is(err, journal.ErrArchived) && !errors.Is(err, journal.ErrStreamRetired) {
			return s.archivedOutcome(ctx, id, opts.IdempotencyKey, err, same)
		}
		return AccountView{}, err
	}
	if !res.Duplicate {
		return s.view(ctx, res.State, res.Version)
	}
	if len(res.Records) != 1 {
		return AccountView{}, keyReused(opts.IdempotencyKey)
	}
	e, err := s.decode(ctx, res.Records[0])
	if err != nil {
		return AccountView{}, err
	}
	if !same(e) {
		return AccountView{}, keyReused(opts.IdempotencyKey)
	}
	return s.view(ctx, res.State, res.Version)
}

// archivedOutcome answers a repeat of idempotency key on account id whose
// event the runtime found archived: its refusal (cause, an
// *journal.ArchivedError) names the version it asked for, the key's event.
// The account is folded through the archive up to that version, and when
// that event carries key and is the same command (same), the repeat gets
// the first outcome. Otherwise the outcome cannot be rebuilt here (a journal
// without an archive reader, a refusal that lost its details crossing
// cluster members): a final outcome_archived answer, never a retry.
func (s *bankService) archivedOutcome(ctx context.Context, id, key string, cause error, same func(bank.Event) bool) (AccountView, error) {
	var ae *journal.ArchivedError
	if _, ok := s.journal.(journal.ArchiveReader); ok && errors.As(cause, &ae) && ae.Stream.Tag == bank.AccountTag(id) && ae.FromVersion > 0 {
		var a bank.Account
		for rec, err := range s.readStream(ctx, s.stream(id), 1, int(ae.FromVersion)) {
			if err != nil {
				return AccountView{}, classify(err)
			}
			e, err := s.decode(ctx, rec)
			if err != nil {
				return AccountView{}, err
			}
			a = bank.Evolve(a, e)
			if rec.Version(bank.AccountTag(id)) == ae.FromVersion && rec.Metadata.IdempotencyKey == key {
				if !same(e) {
					return AccountView{}, keyReused(key)
				}
				return s.view(ctx, a, ae.FromVersion)
			}
		}
	}
	return AccountView{}, fmt.Errorf("%w: %w", &bank.Error{Code: codeOutcomeArchived, Message: fmt.Sprintf(
		"Idempotency-Key %q ran on account %q before, but its events are archived and its outcome cannot be rebuilt; it will not run again: read GET /accounts/%s", key, id, id)}, cause)
}

// accountAt folds account id's stream up to version, through the archive
// where the journal has one (readStream).
func (s *bankService) accountAt(ctx context.Context, id string, version uint64) (AccountView, error) {
	var a bank.Account
	var n uint64
	for rec, err := range s.readStream(ctx, s.stream(id), 1, int(version)) {
		if err != nil {
			return AccountView{}, classify(err)
		}
		e, err := s.decode(ctx, rec)
		if err != nil {
			return AccountView{}, err
		}
		a = bank.Evolve(a, e)
		n = rec.Version(bank.AccountTag(id))
	}
	if n != version {
		return AccountView{}, fmt.Errorf("bank: account %s: read up to version %d, expected %d", id, n, version)
	}
	return s.view(ctx, a, version)
}

// readStream reads versions from (at most limit; 0: all) of stream as
// journal.ReadStream does, and when some of them are archived
// (journal.ErrArchived) and the journal is a journal.ArchiveReader, reads on
// through the archive from the first version not yet yielded, as the
// runtime's recovery does: reads of hot events never touch the archive.
// It never reads the archive of the in-memory journal, which keeps all.
func (s *bankService) readStream(ctx context.Context, stream journal.StreamID, from uint64, limit int) iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		next, n := from, 0
		for rec, err := range s.journal.ReadStream(ctx, stream, from, limit) {
			if err != nil {
				ar, ok := s.journal.(journal.ArchiveReader)
				if !ok || !errors.Is(err, journal.ErrArchived) {
					yield(journal.Record{}, err)
					return
				}
				rest := 0
				if limit > 0 {
					rest = limit - n
				}
				for rec, err := range ar.ReadStreamWithArchive(ctx, stream, next, rest) {
					if !yield(rec, err) || err != nil {
						return
					}
				}
				return
			}
			if !yield(rec, nil) {
				return
			}
			next, n = rec.Version(stream.Tag)+1, n+1
		}
	}
}

// Account implements Service. An account whose stream is empty is reported
// missing, and one whose stream was retired is reported retired
// (account_retired), without activating an actor for it.
func (s *bankService) Account(ctx context.Context, id string) (AccountView, error) {
	sum, err := s.journal.TagSummary(ctx, s.stream(id))
	if err != nil {
		return AccountView{}, classify(err)
	}
	if sum.Version == 0 {
		return AccountView{}, bank.NotFound(id)
	}
	if sum.Retired {
		return AccountView{}, classify(&journal.StreamRetiredError{Stream: s.stream(id), Version: sum.Version})
	}
	res, err := s.execute(ctx, id, readAccount{}, CommandOptions{})
	if err != nil {
		return AccountView{}, err
	}
	if !res.State.Open {
		return AccountView{}, bank.NotFound(id)
	}
	return s.view(ctx, res.State, res.Version)
}

// decode returns the bank event of a stored record, its sealed customer
// fields opened (empty once the customer is erased).
func (s *bankService) decode(ctx context.Context, rec journal.Record) (bank.Event, error) {
	d, err := s.rt.DecodeRecord(ctx, rec)
	if err != nil {
		return nil, classify(err)
	}
	e, ok := d.Value.(bank.Event)
	if !ok {
		return nil, fmt.Errorf("bank: stored event %s of type %q is not a bank event", rec.ID, rec.Type)
	}
	return e, nil
}

// view renders an account state. A customer whose name and email are both
// empty may have been erased: the key store says.
func (s *bankService) view(ctx context.Context, a bank.Account, version uint64) (AccountView, error) {
	v := AccountView{ID: a.ID, Balance: a.Balance, Version: version}
	if a.Customer == nil {
		return v, nil
	}
	v.Customer = &CustomerView{ID: a.Customer.ID, Name: a.Customer.Name, Email: a.Customer.Email}
	if a.Customer.Name == "" && a.Customer.Email == "" {
		look, err := s.keys.Lookup(ctx, []string{a.Customer.ID})
		if err != nil {
			return AccountView{}, classify(err)
		}
		_, v.Customer.Erased = look.Erased[a.Customer.ID]
	}
	return v, nil
}

// EraseCustomer implements Service: the runtime destroys the customer's
// key, records the erasure in the journal (the read model drops the
// customer's data when it reaches it), deletes the snapshots of the
// customer's accounts and reloads their actors without the data.
func (s *bankService) EraseCustomer(ctx context.Context, id string) error {
	if err := bank.ValidateCustomer(bank.Customer{ID: id}); err != nil {
		return err
	}
	look, err := s.keys.Lookup(ctx, []string{id})
	if err != nil {
		return classify(err)
	}
	_, known := look.Keys[id]
	_, erased := look.Erased[id]
	if !known && !erased {
		return &bank.Error{Code: bank.CodeCustomerNotFound, Message: fmt.Sprintf("no account was ever opened for customer %q; check the customer ID", id)}
	}
	if _, err := s.rt.Erase(ctx, id, "bank-api"); err != nil {
		return classify(err)
	}
	return nil
}

// Events implements Service. It reads limit+1 records in one query: the
// extra one, when present, says that more events follow the page and is
// not returned.
func (s *bankService) Events(ctx context.Context, id string, from uint64, limit int) ([]EventView, bool, error) {
	if from < 1 || limit < 1 || limit > maxEventsPage {
		return nil, false, invalidRequest(fmt.Sprintf(
			"an events page from version %d with limit %d was asked for; give a version of at least 1 and a limit from 1 to %d", from, limit, maxEventsPage))
	}
	var page []EventView
	for rec, err := range s.readStream(ctx, s.stream(id), from, limit+1) {
		if err != nil {
			return nil, false, classify(err)
		}
		ev, err := s.eventView(ctx, rec, id)
		if err != nil {
			return nil, false, err
		}
		page = append(page, ev)
	}
	if len(page) > limit {
		return page[:limit:limit], true, nil
	}
	if len(page) > 0 {
		return page, false, nil
	}
	// The page is empty: either the account has no events at all (not
	// found) or it exists and from is past its last version (an empty
	// page). Streams have no gaps and start at version 1, so from 1 an
	// empty page means no account; from a later version, reading version 1
	// alone (an index lookup of one row, cheaper than a summary of the
	// stream) tells the two apart. Streams only grow, so an account created
	// between the two reads is reported as existing, which is also true.
	exists := false
	if from > 1 {
		for _, err := range s.readStream(ctx, s.stream(id), 1, 1) {
			if err != nil {
				return nil, false, classify(err)
			}
			exists = true
		}
	}
	if !exists {
		return nil, false, bank.NotFound(id)
	}
	return []EventView{}, false, nil
}

// eventView renders a stored event with its sealed customer fields opened:
// the history shows the customer's name and email until the customer is
// erased, and then leaves them out.
func (s *bankService) eventView(ctx context.Context, rec journal.Record, id string) (EventView, error) {
	ev := eventView(rec, id)
	if !erasure.HasSealed(rec.Data) {
		return ev, nil
	}
	e, err := s.decode(ctx, rec)
	if err != nil {
		return EventView{}, err
	}
	if ev.Data, err = json.Marshal(e); err != nil {
		return EventView{}, err
	}
	return ev, nil
}

// streamOf returns the stream of account id in the default partition.
func streamOf(id string) journal.StreamID { return journal.Stream(bank.AccountTag(id)) }

// stream returns the stream of account id, in its partition.
func (s *bankService) stream(id string) journal.StreamID {
	return journal.StreamID{Partition: s.parts.of(id), Tag: bank.AccountTag(id)}
}
