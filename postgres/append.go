package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
)

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

// Lock kinds of the advisory lock keys.
const (
	lockTag       = 't' // a tag stream: exclusive for every append carrying the tag
	lockType      = 'y' // an event type in a partition: shared per append, exclusive per type-only condition item
	lockPartition = 'p' // a partition: shared per append, exclusive for a Query.All condition
	lockAll       = 'A' // the journal: shared per append, exclusive for an AllPartitions condition
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
	for _, e := range events {
		for _, t := range e.Tags {
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

// lockArgs returns the sorted keys and modes of a lock set.
func lockArgs(locks map[int64]bool) ([]int64, []bool) {
	keys := make([]int64, 0, len(locks))
	for k := range locks {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	modes := make([]bool, len(keys))
	for i, k := range keys {
		modes[i] = locks[k]
	}
	return keys, modes
}

// lockSQL takes transaction-scoped advisory locks in the given (sorted) order,
// exclusive or shared per key. unnest yields the array in order, and the
// select list is evaluated row by row, so the locks are taken in key order and
// two appends never wait for each other in a cycle.
const lockSQL = `SELECT CASE WHEN x THEN pg_advisory_xact_lock(k) ELSE pg_advisory_xact_lock_shared(k) END
FROM unnest($1::bigint[], $2::bool[]) AS u(k, x)`

// lockEventsSQL marks the transaction as an appender of this journal before it
// gets a transaction ID: catch-up reads gate on the IDs of the sessions holding
// this lock (see gateSetSQL).
const lockEventsSQL = `LOCK TABLE __S__.events IN ROW EXCLUSIVE MODE`

const precheckSQL = `SELECT id FROM __S__.events WHERE id = ANY($1::uuid[])`

// claimSQL claims the versions of an append's streams in one statement. A row
// comes back for every stream whose expected version, lease holder, epoch,
// release flag and node session (unexpired by the database clock) all check
// out; its version is then raised by the append's event count. A stream
// without a row is created only when nothing is expected of it.
const claimSQL = `WITH i AS (
	SELECT * FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[], $7::bigint[])
		AS i(tag, n, expect, node, inc, epoch)
), upd AS (
	UPDATE __S__.streams s SET version = s.version + i.n
	FROM i
	WHERE s.partition = $1 AND s.tag = i.tag
	  AND (i.expect < 0 OR s.version = i.expect)
	  AND (i.node IS NULL OR (
		s.lease_node = i.node AND s.lease_incarnation = i.inc AND s.epoch = i.epoch AND NOT s.released
		AND EXISTS (SELECT 1 FROM __S__.nodes n WHERE n.node_id = i.node AND n.incarnation = i.inc
			AND NOT n.closed AND n.expires_at > clock_timestamp())))
	RETURNING s.tag, s.version, s.head_hash
), ins AS (
	INSERT INTO __S__.streams (partition, tag, version)
	SELECT $1, i.tag, i.n FROM i
	WHERE i.expect <= 0 AND i.node IS NULL
	  AND NOT EXISTS (SELECT 1 FROM __S__.streams s WHERE s.partition = $1 AND s.tag = i.tag)
	ON CONFLICT DO NOTHING
	RETURNING tag, version, head_hash
)
SELECT tag, version, head_hash FROM upd UNION ALL SELECT tag, version, head_hash FROM ins`

// insertSQL stores an append's events, their tag index rows and the new heads
// of their streams. Every event gets the transaction's ID as its commit
// position and the next global sequence, in append order.
const insertSQL = `WITH ev_in AS (
	SELECT * FROM unnest($2::uuid[], $3::text[], $4::int[], $5::bytea[], $6::bytea[], $7::text[], $8::timestamptz[], $9::bytea[], $10::bytea[])
		WITH ORDINALITY AS u(id, type, sv, data, metadata, corr, recorded_at, prev_hashes, hashes, ord)
), tg_in AS (
	SELECT * FROM unnest($11::int[], $12::text[], $13::bigint[]) WITH ORDINALITY AS t(ev, tag, version, k)
), tg_agg AS (
	SELECT ev, array_agg(tag ORDER BY k) AS tags, array_agg(version ORDER BY k) AS versions FROM tg_in GROUP BY ev
), ev AS (
	INSERT INTO __S__.events (commit_xid, id, partition, type, schema_version, tags, versions, prev_hashes, hashes,
		data, metadata, correlation_id, recorded_at)
	SELECT pg_current_xact_id()::text::bigint, u.id, $1, u.type, u.sv,
		coalesce(g.tags, '{}'), coalesce(g.versions, '{}'),
		u.prev_hashes, u.hashes, u.data, u.metadata, u.corr, u.recorded_at
	FROM ev_in u LEFT JOIN tg_agg g ON g.ev = u.ord ORDER BY u.ord
	RETURNING id, commit_xid, seq, type
), et AS (
	INSERT INTO __S__.event_tags (partition, tag, version, commit_xid, seq, type)
	SELECT $1, t.tag, t.version, ev.commit_xid, ev.seq, ev.type
	FROM tg_in t JOIN ev_in u ON u.ord = t.ev JOIN ev ON ev.id = u.id
), st AS (
	UPDATE __S__.streams s SET head_hash = h.head,
		first_commit = coalesce(s.first_commit, a.c), first_seq = coalesce(s.first_seq, a.mn),
		last_commit = a.c, last_seq = a.mx
	FROM unnest($14::text[], $15::bytea[]) AS h(tag, head)
	JOIN (SELECT t.tag, min(ev.commit_xid) AS c, min(ev.seq) AS mn, max(ev.seq) AS mx
		FROM tg_in t JOIN ev_in u ON u.ord = t.ev JOIN ev ON ev.id = u.id GROUP BY t.tag) a ON a.tag = h.tag
	WHERE s.partition = $1 AND s.tag = h.tag
)
SELECT id, commit_xid, seq FROM ev`

// memberMode says how runMember frames its append.
type memberMode int

const (
	modeTx        memberMode = iota // its own transaction; commit pipelined with the insert
	modeHold                        // its own transaction, left open for the caller to commit
	modeSavepoint                   // one member of a batch transaction
)

// runMember executes one append on conn. prefix statements (BEGIN and the
// locks) are sent first, in the same round trip as the checks. It returns the
// result, the append's own failure (its writes rolled back: the savepoint, or
// the whole transaction in modeTx/modeHold), or a fatal error that broke the
// connection or transaction. unknown reports that COMMIT was in flight when
// the connection failed.
func (j *Journal) runMember(ctx context.Context, conn *pgxpool.Conn, r *appendReq, prefix *pgx.Batch, mode memberMode) (res journal.AppendResult, memberErr, fatal error, unknown bool) {
	b := prefix
	if b == nil {
		b = &pgx.Batch{}
	}
	nExec := b.Len()
	if mode == modeSavepoint {
		b.Queue("SAVEPOINT m")
		nExec++
	}
	ids := make([]uuid.UUID, len(r.events))
	for i := range r.events {
		ids[i] = r.events[i].ID
	}
	b.Queue(j.sql(precheckSQL), ids)
	var condSQL string
	var condArgs []any
	if c := r.opts.Condition; c != nil {
		condSQL, condArgs = j.conditionQuery(c)
		b.Queue(condSQL, condArgs...)
	}
	n := len(r.claims)
	tags := make([]string, n)
	counts := make([]int64, n)
	expects := make([]int64, n)
	nodes := make([]*string, n)
	incs := make([]*int64, n)
	epochs := make([]*int64, n)
	for i, c := range r.claims {
		tags[i], counts[i], expects[i] = c.tag, c.n, c.expect
		if c.lease != nil {
			node, inc, ep := c.lease.NodeID, int64(c.lease.Incarnation), int64(c.lease.Epoch)
			nodes[i], incs[i], epochs[i] = &node, &inc, &ep
		}
	}
	b.Queue(j.sql(claimSQL), r.partition, tags, counts, expects, nodes, incs, epochs)

	// undo rolls this member back; a failure to do so is fatal.
	undo := func() error {
		var err error
		if mode == modeSavepoint {
			_, err = conn.Exec(ctx, "ROLLBACK TO SAVEPOINT m; RELEASE SAVEPOINT m")
		} else {
			_, err = conn.Exec(ctx, "ROLLBACK")
		}
		return err
	}
	failed := func(err error) (journal.AppendResult, error, error, bool) {
		if isConnErr(err) {
			return journal.AppendResult{}, nil, err, false
		}
		if uerr := undo(); uerr != nil {
			return journal.AppendResult{}, nil, uerr, false
		}
		if isIDRace(err) {
			return journal.AppendResult{}, err, nil, false
		}
		return journal.AppendResult{}, j.translate("append", err), nil, false
	}

	br := conn.SendBatch(ctx, b)
	var (
		existing  int
		condFound bool
		heads     = make(map[string]claimed, n)
	)
	err := func() error {
		for range nExec {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			existing++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if condSQL != "" {
			if err := br.QueryRow().Scan(&condFound); err != nil {
				return err
			}
		}
		rows, err = br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				tag  string
				v    int64
				head []byte
			)
			if err := rows.Scan(&tag, &v, &head); err != nil {
				rows.Close()
				return err
			}
			var h journal.Hash
			copy(h[:], head)
			heads[tag] = claimed{version: uint64(v), head: h}
		}
		return rows.Err()
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if prefix != nil && isConnErr(err) {
			return journal.AppendResult{}, nil, err, false
		}
		return failed(err)
	}

	switch {
	case existing == len(r.events):
		// Every ID is stored: an idempotent retry. Nothing is checked or written.
		if err := undo(); err != nil {
			return journal.AppendResult{}, nil, err, false
		}
		recs, err := j.recordsByID(ctx, conn, r.events)
		if err != nil {
			if isConnErr(err) {
				return journal.AppendResult{}, nil, err, false
			}
			return journal.AppendResult{}, err, nil, false
		}
		return journal.AppendResult{Records: recs, Duplicate: true}, nil, nil, false
	case existing > 0:
		if err := undo(); err != nil {
			return journal.AppendResult{}, nil, err, false
		}
		return journal.AppendResult{}, fmt.Errorf("%w: %d of the append's %d event IDs are already stored; an append is idempotent only as a whole: retry it with exactly the same events, or use fresh IDs", journal.ErrDuplicateMismatch, existing, len(r.events)), nil, false
	}
	if len(heads) < n {
		derr := j.diagnose(ctx, conn, r, heads)
		if uerr := undo(); uerr != nil {
			return journal.AppendResult{}, nil, uerr, false
		}
		return journal.AppendResult{}, derr, nil, false
	}
	if condFound {
		if err := undo(); err != nil {
			return journal.AppendResult{}, nil, err, false
		}
		c := r.opts.Condition
		return journal.AppendResult{}, fmt.Errorf("%w: an event matching the condition's query exists after position %s; read again and decide on the newer events", journal.ErrAppendConditionFailed, c.After), nil, false
	}

	// Checks passed. Link the records into their streams' hash chains.
	now := j.cfg.Clock().UTC().Truncate(time.Microsecond)
	cur := make(map[journal.Tag]claimed, n)
	for _, c := range r.claims {
		h := heads[c.tag]
		cur[journal.Tag(c.tag)] = claimed{version: h.version - uint64(c.n), head: h.head}
	}
	recs := make([]journal.Record, len(r.events))
	var (
		evIDs     = make([]uuid.UUID, len(r.events))
		evTypes   = make([]string, len(r.events))
		evSV      = make([]int32, len(r.events))
		evData    = make([][]byte, len(r.events))
		evMeta    = make([][]byte, len(r.events))
		evCorr    = make([]*string, len(r.events))
		evAt      = make([]time.Time, len(r.events))
		evPrev    = make([][]byte, len(r.events))
		evHash    = make([][]byte, len(r.events))
		tgEv      []int32
		tgTag     []string
		tgVersion []int64
	)
	for i := range r.events {
		rec := &recs[i]
		rec.Event = r.events[i]
		rec.RecordedAt = now
		journal.LinkRecord(rec, func(t journal.Tag) (uint64, journal.Hash) {
			c := cur[t]
			return c.version, c.head
		})
		var prev, hashes bytes.Buffer
		for _, l := range rec.Links {
			cur[l.Tag] = claimed{version: l.Version, head: l.Hash}
			prev.Write(l.PrevHash[:])
			hashes.Write(l.Hash[:])
			tgEv = append(tgEv, int32(i+1))
			tgTag = append(tgTag, string(l.Tag))
			tgVersion = append(tgVersion, int64(l.Version))
		}
		meta, err := json.Marshal(rec.Metadata)
		if err != nil {
			_ = undo()
			return journal.AppendResult{}, fmt.Errorf("postgres: append: encode metadata of event %d: %w", i, err), nil, false
		}
		evIDs[i], evTypes[i], evSV[i] = rec.ID, rec.Type, int32(rec.SchemaVersion)
		evData[i], evMeta[i], evAt[i] = rec.Data, meta, now
		evPrev[i], evHash[i] = append([]byte{}, prev.Bytes()...), append([]byte{}, hashes.Bytes()...)
		if rec.Metadata.CorrelationID != "" {
			c := rec.Metadata.CorrelationID
			evCorr[i] = &c
		}
	}
	var headTags []string
	var headHashes [][]byte
	for _, c := range r.claims {
		if c.n == 0 {
			continue
		}
		h := cur[journal.Tag(c.tag)].head
		headTags = append(headTags, c.tag)
		headHashes = append(headHashes, h[:])
	}

	if mode != modeSavepoint && j.hooks.afterChecks != nil {
		if err := j.hooks.afterChecks(ctx, conn); err != nil {
			return failed(err)
		}
	}
	b = &pgx.Batch{}
	ins := j.sql(insertSQL)
	if j.hooks.ungatedOrder {
		ins = strings.Replace(ins, "pg_current_xact_id()::text::bigint", "0", 1)
	}
	b.Queue(ins, r.partition, evIDs, evTypes, evSV, evData, evMeta, evCorr, evAt, evPrev, evHash,
		tgEv, tgTag, tgVersion, headTags, headHashes)
	commitInPipeline := false
	switch mode {
	case modeSavepoint:
		b.Queue("RELEASE SAVEPOINT m")
	case modeTx:
		if j.hooks.beforeCommit == nil {
			b.Queue("COMMIT")
			commitInPipeline = true
		}
	}
	br = conn.SendBatch(ctx, b)
	pos := make(map[uuid.UUID]journal.Position, len(r.events))
	insertDone := false
	err = func() error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				id     uuid.UUID
				c, seq int64
			)
			if err := rows.Scan(&id, &c, &seq); err != nil {
				rows.Close()
				return err
			}
			pos[id] = journal.Position{Commit: uint64(c), Seq: uint64(seq)}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		insertDone = true
		for i := 1; i < b.Len(); i++ {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return nil
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if isConnErr(err) {
			// The outcome is unknown only if COMMIT may have run: it was in
			// the pipeline, and the insert did not fail first (the server
			// skips the rest of a pipeline after an error; a server error,
			// even FATAL, as the insert's result means the insert failed).
			var pgErr *pgconn.PgError
			definite := !insertDone && (errors.As(err, &pgErr) || pgconn.SafeToRetry(err))
			return journal.AppendResult{}, nil, err, commitInPipeline && !definite
		}
		return failed(err)
	}
	for i := range recs {
		p, ok := pos[recs[i].ID]
		if !ok {
			return journal.AppendResult{}, nil, fmt.Errorf("postgres: append: event %s came back without a position", recs[i].ID), commitInPipeline
		}
		recs[i].Position = p
	}
	res = journal.AppendResult{Records: recs}
	if mode == modeTx && !commitInPipeline {
		if err := j.hooks.beforeCommit(ctx, conn); err != nil {
			return journal.AppendResult{}, nil, err, false
		}
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			if isConnErr(err) {
				return journal.AppendResult{}, nil, err, !pgconn.SafeToRetry(err)
			}
			return journal.AppendResult{}, j.translate("append: commit", err), nil, false
		}
	}
	return res, nil, nil, false
}

// isIDRace reports a unique violation on the event ID: a concurrent append
// stored the same ID after this append's duplicate check.
func isIDRace(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "events_id_key"
}

// claimed is a stream's version and head hash.
type claimed struct {
	version uint64
	head    journal.Hash
}

// diagnose explains why the claim statement skipped some of r's streams: a
// lease that is not current (ErrInvalidSession), an expired node session
// (ErrSessionExpired), or an expected version that does not match.
func (j *Journal) diagnose(ctx context.Context, conn *pgxpool.Conn, r *appendReq, ok map[string]claimed) error {
	var failing []claim
	var tags, nodeIDs []string
	for _, c := range r.claims {
		if _, done := ok[c.tag]; !done {
			failing = append(failing, c)
			tags = append(tags, c.tag)
			if c.lease != nil {
				nodeIDs = append(nodeIDs, c.lease.NodeID)
			}
		}
	}
	type streamRow struct {
		exists   bool
		version  int64
		node     *string
		inc      *int64
		epoch    int64
		released bool
	}
	streams := map[string]streamRow{}
	rows, err := conn.Query(ctx, j.sql(`SELECT tag, version, lease_node, lease_incarnation, epoch, released
		FROM __S__.streams WHERE partition = $1 AND tag = ANY($2::text[])`), r.partition, tags)
	if err != nil {
		return j.translate("append: diagnose", err)
	}
	for rows.Next() {
		var tag string
		var s streamRow
		if err := rows.Scan(&tag, &s.version, &s.node, &s.inc, &s.epoch, &s.released); err != nil {
			rows.Close()
			return j.translate("append: diagnose", err)
		}
		s.exists = true
		streams[tag] = s
	}
	if err := rows.Err(); err != nil {
		return j.translate("append: diagnose", err)
	}
	type nodeRow struct {
		inc    int64
		closed bool
		live   bool
	}
	nodes := map[string]nodeRow{}
	if len(nodeIDs) > 0 {
		rows, err := conn.Query(ctx, j.sql(`SELECT node_id, incarnation, closed, expires_at > clock_timestamp()
			FROM __S__.nodes WHERE node_id = ANY($1::text[])`), nodeIDs)
		if err != nil {
			return j.translate("append: diagnose", err)
		}
		for rows.Next() {
			var id string
			var nr nodeRow
			if err := rows.Scan(&id, &nr.inc, &nr.closed, &nr.live); err != nil {
				rows.Close()
				return j.translate("append: diagnose", err)
			}
			nodes[id] = nr
		}
		if err := rows.Err(); err != nil {
			return j.translate("append: diagnose", err)
		}
	}
	var errs []error
	for _, c := range failing {
		id := journal.StreamID{Partition: r.partition, Tag: journal.Tag(c.tag)}
		s := streams[c.tag]
		if l := c.lease; l != nil {
			nr, found := nodes[l.NodeID]
			switch {
			case !found || nr.inc != int64(l.Incarnation):
				errs = append(errs, &journal.SessionError{Stream: id, Err: journal.ErrInvalidSession,
					Detail: fmt.Sprintf("node %s incarnation %d was superseded by a newer incarnation; the stream must be reacquired", l.NodeID, l.Incarnation)})
				continue
			case nr.closed:
				errs = append(errs, &journal.SessionError{Stream: id, Err: journal.ErrInvalidSession,
					Detail: fmt.Sprintf("node session %s incarnation %d was closed; open a new node session and reacquire the stream", l.NodeID, l.Incarnation)})
				continue
			case !s.exists || s.node == nil || *s.node != l.NodeID || s.inc == nil || *s.inc != int64(l.Incarnation) || s.epoch != int64(l.Epoch):
				errs = append(errs, &journal.SessionError{Stream: id, Err: journal.ErrInvalidSession,
					Detail: fmt.Sprintf("the lease (epoch %d) is no longer current: the stream's epoch is %d; another writer acquired it, so stop writing and reacquire", l.Epoch, s.epoch)})
				continue
			case s.released:
				errs = append(errs, &journal.SessionError{Stream: id, Err: journal.ErrInvalidSession,
					Detail: fmt.Sprintf("the lease (epoch %d) was released; acquire the stream again before appending", l.Epoch)})
				continue
			case !nr.live:
				errs = append(errs, &journal.SessionError{Stream: id, Err: journal.ErrSessionExpired,
					Detail: fmt.Sprintf("node session %s incarnation %d expired; renew node sessions well before their timeout", l.NodeID, l.Incarnation)})
				continue
			}
		}
		if c.expect >= 0 && s.version != c.expect {
			errs = append(errs, &journal.VersionMismatchError{Stream: id, Expected: uint64(c.expect), Actual: uint64(s.version)})
			continue
		}
	}
	if len(errs) == 0 {
		return fmt.Errorf("%w: postgres: streams %v of partition %q changed concurrently while the append claimed them; retry the append", journal.ErrVersionMismatch, tags, r.partition)
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// Append stores events atomically; see journal.Appender. With batching on
// (the default), concurrent calls may share one transaction, each in its own
// savepoint with its own checks; a conflict fails only its own call.
// Limits returns the limits Append validates with (journal.Limited).
func (j *Journal) Limits() journal.Limits { return j.limits }

func (j *Journal) Append(ctx context.Context, events []journal.Event, opts journal.AppendOptions) (journal.AppendResult, error) {
	if err := j.checkOpen(); err != nil {
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
	switch {
	case !j.cfg.Batching.Disabled:
		res, err = j.enqueue(ctx, r)
	case j.hooks.slowPath:
		res, _, err = j.appendDirect(ctx, r, modeTx)
	default:
		outcomes, fallback := j.runFast(ctx, []*appendReq{r})
		if fallback {
			res, _, err = j.appendDirect(ctx, r, modeTx)
		} else {
			res, err = outcomes[0].res, outcomes[0].err
		}
	}
	if err == nil && !res.Duplicate {
		j.committed()
	}
	return res, err
}

// appendDirect runs r in a transaction of its own. In modeHold it returns with
// the transaction open and a release function that commits it.
func (j *Journal) appendDirect(ctx context.Context, r *appendReq, mode memberMode) (journal.AppendResult, func() (journal.AppendResult, error), error) {
	conn, err := j.pool.Acquire(ctx)
	if err != nil {
		return journal.AppendResult{}, nil, j.translate("append: acquire connection", err)
	}
	prefix := &pgx.Batch{}
	prefix.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	keys, modes := lockArgs(r.locks)
	prefix.Queue(lockSQL, keys, modes)
	if !j.hooks.ungatedOrder {
		prefix.Queue(j.sql(lockEventsSQL))
	}
	res, memberErr, fatal, unknown := j.runMember(ctx, conn, r, prefix, mode)
	if fatal == nil && isIDRace(memberErr) {
		// A concurrent append stored one of these event IDs after our
		// duplicate check: run again, now seeing it (a retry comes back
		// as Duplicate). The transaction was rolled back: begin anew.
		prefix = &pgx.Batch{}
		prefix.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
		prefix.Queue(lockSQL, keys, modes)
		if !j.hooks.ungatedOrder {
			prefix.Queue(j.sql(lockEventsSQL))
		}
		res, memberErr, fatal, unknown = j.runMember(ctx, conn, r, prefix, mode)
	}
	if isIDRace(memberErr) {
		memberErr = j.translate("append", memberErr)
	}
	if fatal != nil {
		conn.Release() // the pool discards a broken or mid-transaction connection
		return journal.AppendResult{}, nil, j.fatalErr(fatal, unknown)
	}
	if memberErr != nil {
		conn.Release()
		return journal.AppendResult{}, nil, memberErr
	}
	if mode != modeHold || res.Duplicate {
		conn.Release()
		if mode == modeHold {
			return res, func() (journal.AppendResult, error) { return res, nil }, nil
		}
		return res, nil, nil
	}
	release := func() (journal.AppendResult, error) {
		defer conn.Release()
		if _, err := conn.Exec(context.WithoutCancel(ctx), "COMMIT"); err != nil {
			return journal.AppendResult{}, j.fatalErr(err, isConnErr(err) && !pgconn.SafeToRetry(err))
		}
		j.committed()
		return res, nil
	}
	return res, release, nil
}

// fatalErr reports a broken append transaction: unknown outcome when COMMIT
// was in flight, otherwise a definite failure (nothing was written).
func (j *Journal) fatalErr(err error, unknown bool) error {
	if unknown {
		if unavailable(err) {
			return fmt.Errorf("%w (%w): postgres: the connection failed while the commit was in flight (%v); retry the same append (same event IDs) once the database is back to learn whether it was stored", journal.ErrOutcomeUnknown, journal.ErrUnavailable, err)
		}
		return fmt.Errorf("%w: postgres: the connection failed while the commit was in flight (%v); retry the same append (same event IDs) to learn whether it was stored", journal.ErrOutcomeUnknown, err)
	}
	return j.translate("append (nothing was written)", err)
}
