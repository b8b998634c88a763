package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// DCB conditions at READ COMMITTED (the package documentation's summary, in full).
//
// Transaction-scoped advisory locks, taken before anything else in one
// statement, in ascending key order (no deadlocks): every append takes an
// EXCLUSIVE lock per tag it touches and SHARED locks on each of its event
// types, its partition and the whole journal. An append with a condition also
// takes EXCLUSIVE locks derived from its query: per item, the first of its
// tags if it has tags (every matching event carries that tag), else each of its
// types; Query.All takes the partition's key, AllPartitions the journal's. Once
// the conditional append holds its locks, every append that could add a
// matching event has either committed (and a fresh READ COMMITTED statement
// sees it) or waits for this transaction, so the condition check and the write
// are atomic without serializable retries.
//
// A condition needs no query of its own when the database already checks
// what it asks. The write statement checks every stream an append claims
// (writes to, expects a version of, or holds the lease of) at the version and
// newest-event position the decision assumed. If every item of the
// condition's query names a tag whose claimed stream's newest event is at or
// before the condition's position, no matching event can lie after that
// position while those streams are unchanged (every matching event carries the
// tag); if one changed, the write is fenced and the batch is read and decided
// again with the condition queried. A DCB command reserves and claims every
// tag of its query and folds up to their newest positions, so its condition
// is always of this kind (MetricImpliedConditions counts them).

// appendReq is one validated Append on its way to the database.
type appendReq struct {
	ctx       context.Context
	events    []journal.Event // normalized by journal.PrepareAppend
	partition string
	opts      journal.AppendOptions
	claims    []claim        // sorted by tag
	locks     map[int64]bool // advisory lock key -> exclusive
	done      chan appendOutcome
}

type appendOutcome struct {
	res journal.AppendResult
	err error
}

// claim is one stream an append touches: n events of it, an expected version
// (-1: none) and a lease (nil: none).
type claim struct {
	tag    string
	n      int64
	expect int64
	lease  *journal.Lease
}

// Lock kinds of the advisory lock keys (see pgschema).
const (
	lockTag       = pgschema.LockTag
	lockType      = pgschema.LockType
	lockPartition = pgschema.LockPartition
	lockAll       = pgschema.LockAll
)

func (j *Journal) newAppendReq(ctx context.Context, events []journal.Event, partition string, opts journal.AppendOptions) *appendReq {
	byTag := map[string]*claim{}
	get := func(tag string) *claim {
		c := byTag[tag]
		if c == nil {
			c = &claim{tag: tag, expect: -1}
			byTag[tag] = c
		}
		return c
	}
	locks := map[int64]bool{}
	shared := func(k int64) {
		if _, ok := locks[k]; !ok {
			locks[k] = false
		}
	}
	for i := range events {
		e := &events[i]
		for _, t := range journal.ChainTags(e) {
			get(string(t)).n++
		}
		shared(j.lockKey(lockType, partition, e.Type))
	}
	shared(j.lockKey(lockPartition, partition, ""))
	shared(j.lockKey(lockAll, "", ""))
	for t, v := range opts.Expect {
		get(string(t)).expect = int64(v)
	}
	for i := range opts.Leases {
		l := opts.Leases[i]
		l.Stream = l.Stream.Normalize()
		get(string(l.Stream.Tag)).lease = &l
	}
	claims := make([]claim, 0, len(byTag))
	for _, c := range byTag {
		claims = append(claims, *c)
		locks[j.lockKey(lockTag, partition, c.tag)] = true
	}
	slices.SortFunc(claims, func(a, b claim) int { return strings.Compare(a.tag, b.tag) })
	if c := opts.Condition; c != nil {
		q := c.FailIfEventsMatch
		qp := q.PartitionOrDefault()
		switch {
		case q.All && q.AllPartitions:
			locks[j.lockKey(lockAll, "", "")] = true
		case q.All:
			locks[j.lockKey(lockPartition, qp, "")] = true
		default:
			for _, it := range q.Items {
				if len(it.Tags) > 0 {
					// Every event matching the item carries this tag, so
					// its append holds this key exclusively.
					locks[j.lockKey(lockTag, qp, string(it.Tags[0]))] = true
					continue
				}
				for _, ty := range it.Types {
					locks[j.lockKey(lockType, qp, ty)] = true
				}
			}
		}
	}
	return &appendReq{ctx: ctx, events: events, partition: partition, opts: opts, claims: claims, locks: locks, done: make(chan appendOutcome, 1)}
}

// precheckSQL finds the append's event IDs already stored, hot or archived
// (an archived event's ID is as taken as a hot one's).
const precheckSQL = `SELECT id FROM __S__.events WHERE id = ANY($1::uuid[])
	UNION ALL SELECT id FROM __S__.events_archive WHERE id = ANY($1::uuid[])`

// Limits returns the limits Append validates with (journal.Limited).
func (j *Journal) Limits() journal.Limits { return j.limits }

// Append stores events atomically; see journal.Appender. With batching on
// (the default), concurrent calls may share one transaction, each decided on
// its own (see engine.go); a conflict fails only its own call.
func (j *Journal) Append(ctx context.Context, events []journal.Event, opts journal.AppendOptions) (journal.AppendResult, error) {
	if err := j.checkOpen(); err != nil {
		return journal.AppendResult{}, err
	}
	if err := j.writable("append"); err != nil {
		return journal.AppendResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return journal.AppendResult{}, fmt.Errorf("postgres: append: %w", err)
	}
	prepared, partition, err := journal.PrepareAppend(events, opts, j.limits)
	if err != nil {
		return journal.AppendResult{}, err
	}
	r := j.newAppendReq(ctx, prepared, partition, opts)
	var res journal.AppendResult
	if j.cfg.Batching.Disabled {
		outcomes, _ := j.run(ctx, []*appendReq{r}, false)
		res, err = outcomes[0].res, outcomes[0].err
	} else {
		res, err = j.enqueue(ctx, r)
	}
	if err == nil && !res.Duplicate {
		j.committed()
	}
	if journal.LeaseRevoked(err) {
		err = j.refusedWhereMoved(ctx, partition, err)
	}
	return res, err
}

// refusedWhereMoved adds to an append refused for its leases where the
// partition went when it moved away from this schema: after a move's retire
// the source holds no lease of the partition, so every append sent there is
// refused as "never acquired", which alone does not tell a node whose map
// still names this database where to send it (a DCB command's executor
// appends with leases its owners took where the partition now is). The
// error then also matches journal.ErrPartitionMoved, naming the database,
// and still matches what it matched: nothing was written either way.
func (j *Journal) refusedWhereMoved(ctx context.Context, partition string, refused error) error {
	var moved *journal.PartitionMoveError
	if errors.As(j.movedAway(ctx, partition), &moved) && moved.Moved {
		return errors.Join(refused, moved)
	}
	return refused
}

// fatalErr reports a broken append transaction: unknown outcome when COMMIT
// was in flight, otherwise a definite failure (nothing was written).
func (j *Journal) fatalErr(err error, unknown bool) error {
	if unknown {
		j.server.lost()
		if unavailable(err) {
			return fmt.Errorf("%w (%w): postgres: the connection failed while the commit was in flight (%v); retry the same append (same event IDs) once the database is back to learn whether it was stored", journal.ErrOutcomeUnknown, journal.ErrUnavailable, err)
		}
		return fmt.Errorf("%w: postgres: the connection failed while the commit was in flight (%v); retry the same append (same event IDs) to learn whether it was stored", journal.ErrOutcomeUnknown, err)
	}
	return j.translate("append (nothing was written)", err)
}
