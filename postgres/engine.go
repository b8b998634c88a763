package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
)

// The append engine. Every append, alone or in a batch of concurrent appends,
// runs through run: one transaction, one decision in Go (decide, the only
// place that judges leases, expected versions, duplicates and conditions),
// and one write statement (writeSQL) that makes the database check the same
// things again, under the batch's advisory locks, before it writes anything.
//
// An attempt is either
//
//   - direct (one round trip): when the journal knows every touched stream's
//     version and head hash from its own earlier appends (heads), the batch is
//     decided against that knowledge and BEGIN, the locks, the conditions (as
//     assertions), the write statement and COMMIT go out in one pipeline. The
//     write statement's fence checks every stream's version, lease holder,
//     epoch, release flag and node session by the database clock, and the
//     unique event ID index rejects a stored ID; if anything differs from what
//     was assumed, the transaction rolls back and the batch runs again as
//     a read attempt. Nothing is ever written on an assumption: the database
//     decides.
//   - read (two round trips): BEGIN, the locks, and a read of the touched
//     streams, their lease nodes, the stored event IDs and each condition; the
//     batch is decided against what was read; then the write statement and
//     COMMIT. Under the locks nothing the decision read can change except a
//     node session expiring or a lease taken over; the fence catches those,
//     and the batch is read and decided again (up to maxAttempts).
//
// Each append of a batch is judged on its own, in order, as if the appends ran
// one after the other; a rejected append fails alone.

// maxAttempts bounds how often one batch is decided again after its write
// statement's fence failed.
const maxAttempts = 4

// fastStream is a stream's state for one decision, and its running state.
type fastStream struct {
	exists  bool
	before  uint64 // version the decision started from
	version uint64 // running version
	head    journal.Hash
	// last is the position of the stream's newest event when the decision
	// started, zero when unknown or the stream has none. The write statement
	// checks it with the version, so an append's condition can rest on it
	// (see implied).
	last     journal.Position
	node     *string
	inc      *int64
	epoch    int64
	released bool
	// retired: the stream has a tombstone; every append naming it fails
	// with journal.ErrStreamRetired (checkClaims), and the write statement
	// refuses to claim it (its fence), so a direct attempt on a remembered
	// head is fenced and decided again on what is read.
	retired bool
	lease   *journal.Lease // the lease the accepted appends carry
	n       int64
	// newest is 1 + the index in the decision's accepted records of the
	// stream's newest event in this batch, 0 when the batch writes none.
	newest int
	// claimed: an accepted append of the batch writes to the stream, expects
	// a version of it or carries its lease, so the write statement checks
	// the stream's version (and lease) in the database.
	claimed bool
}

type fastNode struct {
	inc    int64
	closed bool
	live   bool
}

type streamKey struct{ partition, tag string }

// batchState is what a decision is made on.
type batchState struct {
	keys map[streamKey]*fastStream
	// nodes are the lease nodes' sessions; nil in a direct attempt, where
	// only the database checks leases.
	nodes    map[string]fastNode
	existing map[uuid.UUID]bool
	condHit  []bool
}

// decision is the outcome of decide: per append an error, a duplicate, or
// accepted records (linked into their chains, positions not yet known).
type decision struct {
	outcomes    []appendOutcome
	accepted    []journal.Record
	acceptedIdx map[int][2]int // append -> [from, to) in accepted
	dups        map[int]bool
}

// heads remembers the version, head hash and newest event's position of
// streams this journal appended to, so that the next append to them can go
// out in one round trip. It is a hint only: the write statement checks every
// version and position it relies on.
type heads struct {
	mu sync.Mutex
	m  map[streamKey]head
}

// head is a remembered stream head.
type head struct {
	version uint64
	hash    journal.Hash
	last    journal.Position // zero: unknown
}

// maxHeads bounds the heads cache; past it the cache starts over.
const maxHeads = 1 << 16

// learn records that stream k is at head hd. A version below the one already
// known is ignored (two batches of one stream may report in either order).
func (h *heads) learn(k streamKey, hd head) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxHeads {
		h.m = make(map[streamKey]head)
	}
	if old, ok := h.m[k]; ok && old.version > hd.version {
		return
	}
	h.m[k] = hd
}

func (h *heads) forget(batch []*appendReq) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range batch {
		for _, c := range r.claims {
			delete(h.m, streamKey{r.partition, c.tag})
		}
	}
}

// known returns a direct attempt's state for batch, or nil when some stream
// is not known.
func (h *heads) known(batch []*appendReq) *batchState {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := &batchState{keys: map[streamKey]*fastStream{}, existing: map[uuid.UUID]bool{}, condHit: make([]bool, len(batch))}
	for _, r := range batch {
		for _, c := range r.claims {
			k := streamKey{r.partition, c.tag}
			if st.keys[k] != nil {
				continue
			}
			l, ok := h.m[k]
			if !ok {
				return nil
			}
			st.keys[k] = &fastStream{exists: true, before: l.version, version: l.version, head: l.hash, last: l.last}
		}
	}
	return st
}

const fastStateSQL = `SELECT s.partition, s.tag, s.version, s.head_hash, s.lease_node, s.lease_incarnation, s.epoch, s.released,
	s.last_commit, s.last_seq, s.retired
FROM unnest($1::text[], $2::text[]) AS k(partition, tag)
JOIN __S__.streams s ON s.partition = k.partition AND s.tag = k.tag`

const fastNodesSQL = `SELECT node_id, incarnation, closed, expires_at > clock_timestamp() FROM __S__.nodes WHERE node_id = ANY($1::text[])`

// writeSQL claims the streams and inserts the events of a batch's accepted
// appends in one statement. It draws the positions (the transaction ID and
// one sequence number per event, in append order), raises each stream's
// version, head and first/last positions — rechecking its version, the
// position of its newest event where the decision knew one, lease holder,
// epoch, release flag and node session by the database clock (each node
// session named once per statement, in live, not once per stream; a scalar
// subquery, so it stays a primary-key probe however many rows nodes has) — and
// aborts through fence_check unless every stream checked out. A retired
// stream (tombstone) never checks out: its row is never claimed, and since
// the row stays forever it is never created again either. A stream
// without a row is created only when nothing is expected of it, and only when
// events are written to it (an expectation of version 0 on a stream without a
// row holds without creating one). Every event has at least one chain tag
// (journal.ChainTags: its tags, or its untagged chain), so every event has a
// tg_agg row; write checks the inserted counts, so an event without one could
// not be dropped silently. The unique index on events.id rejects a stored
// event ID; the fence also rejects an archived one (events_archive's ID index,
// one probe per event), so the batch is read and decided again and the
// append is answered as a duplicate, as for a hot one.
const writeSQL = `WITH x AS MATERIALIZED (
	SELECT pg_current_xact_id()::text::bigint AS xid
), ev_in AS MATERIALIZED (
	SELECT u.*, nextval('__S__.events_seq') AS seq
	FROM unnest($10::uuid[], $11::text[], $12::text[], $13::int[], $14::bytea[], $15::bytea[], $16::text[],
		$17::timestamptz[], $18::bytea[], $19::bytea[])
		WITH ORDINALITY AS u(id, partition, type, sv, data, metadata, corr, recorded_at, prev_hashes, hashes, ord)
), tg_in AS MATERIALIZED (
	SELECT * FROM unnest($20::int[], $21::text[], $22::bigint[]) WITH ORDINALITY AS t(ev, tag, version, k)
), span AS (
	SELECT u.partition, t.tag, min(u.seq) AS first_seq, max(u.seq) AS last_seq
	FROM tg_in t JOIN ev_in u ON u.ord = t.ev GROUP BY u.partition, t.tag
), c AS MATERIALIZED (
	SELECT c.*, sp.first_seq, sp.last_seq, (SELECT xid FROM x) AS xid
	FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[], $7::bigint[], $8::bytea[],
		$23::bigint[], $24::bigint[])
		AS c(partition, tag, n, before, node, inc, epoch, head, was_commit, was_seq)
	LEFT JOIN span sp ON sp.partition = c.partition AND sp.tag = c.tag
), live AS MATERIALIZED (
	SELECT cn.node AS node_id, cn.inc AS incarnation
	FROM (SELECT DISTINCT c.node, c.inc FROM c WHERE c.node IS NOT NULL) cn
	WHERE (SELECT true FROM __S__.nodes n WHERE n.node_id = cn.node AND n.incarnation = cn.inc
		AND NOT n.closed AND n.expires_at > clock_timestamp())
), claimed AS (
	UPDATE __S__.streams s SET version = s.version + c.n,
		head_hash = CASE WHEN c.n > 0 THEN c.head ELSE s.head_hash END,
		first_commit = CASE WHEN s.first_commit IS NULL AND c.n > 0 THEN c.xid ELSE s.first_commit END,
		first_seq = coalesce(s.first_seq, c.first_seq),
		last_commit = CASE WHEN c.n > 0 THEN c.xid ELSE s.last_commit END,
		last_seq = coalesce(c.last_seq, s.last_seq)
	FROM c
	WHERE s.partition = c.partition AND s.tag = c.tag AND s.version = c.before AND NOT s.retired
	  AND (c.was_commit IS NULL OR (s.last_commit = c.was_commit AND s.last_seq = c.was_seq))
	  AND (c.node IS NULL OR (
		s.lease_node = c.node AND s.lease_incarnation = c.inc AND s.epoch = c.epoch AND NOT s.released
		AND EXISTS (SELECT 1 FROM live l WHERE l.node_id = c.node AND l.incarnation = c.inc)))
	RETURNING 1
), created AS (
	INSERT INTO __S__.streams (partition, tag, version, head_hash, first_commit, first_seq, last_commit, last_seq)
	SELECT c.partition, c.tag, c.n, c.head, c.xid, c.first_seq, c.xid, c.last_seq FROM c
	WHERE c.before = 0 AND c.node IS NULL AND c.n > 0
	  AND NOT EXISTS (SELECT 1 FROM __S__.streams s WHERE s.partition = c.partition AND s.tag = c.tag)
	ON CONFLICT DO NOTHING
	RETURNING 1
), absent AS (
	SELECT 1 FROM c WHERE c.before = 0 AND c.node IS NULL AND c.n = 0
	  AND NOT EXISTS (SELECT 1 FROM __S__.streams s WHERE s.partition = c.partition AND s.tag = c.tag)
), fence AS (
	SELECT __S__.fence_check((SELECT count(*) FROM claimed) + (SELECT count(*) FROM created) + (SELECT count(*) FROM absent) = $9
		AND NOT EXISTS (SELECT 1 FROM __S__.events_archive a WHERE a.id = ANY($10::uuid[]))) AS ok
), tg_agg AS (
	SELECT ev, array_agg(tag ORDER BY k) AS tags, array_agg(version ORDER BY k) AS versions FROM tg_in GROUP BY ev
), ev AS (
	INSERT INTO __S__.events (commit_xid, seq, id, partition, type, schema_version, tags, versions, prev_hashes, hashes,
		data, metadata, correlation_id, recorded_at)
	SELECT (SELECT xid FROM x), u.seq, u.id, u.partition, u.type, u.sv, g.tags, g.versions,
		u.prev_hashes, u.hashes, u.data, u.metadata, u.corr, u.recorded_at
	FROM ev_in u JOIN tg_agg g ON g.ev = u.ord WHERE (SELECT ok FROM fence)
	RETURNING 1
), et AS (
	INSERT INTO __S__.event_tags (partition, tag, version, commit_xid, seq, type)
	SELECT u.partition, t.tag, t.version, (SELECT xid FROM x), u.seq, u.type
	FROM tg_in t JOIN ev_in u ON u.ord = t.ev WHERE (SELECT ok FROM fence)
	RETURNING 1
)
SELECT (SELECT xid FROM x), ARRAY(SELECT seq FROM ev_in ORDER BY ord), (SELECT count(*) FROM ev), (SELECT count(*) FROM et)`

// assertSQL turns a condition query (SELECT EXISTS …) into an assertion that
// aborts the transaction when an event matches: a direct attempt cannot look
// at the answer before its write goes out.
func (j *Journal) assertSQL(cond string) string {
	return "SELECT " + j.s + ".fence_check(NOT (" + cond + "))"
}

// implied reports that condition c of an append in partition needs no
// statement of its own in a direct attempt: every item of its query has a tag
// whose stream the batch claims (so the write statement checks the stream's
// version and the position of its newest event, both as of the batch's
// start) and whose newest event is at or before c.After. Every event matching
// the item carries that tag, so while the stream is unchanged none can lie
// after c.After; if it changed, the write is fenced and the batch is read and
// decided again with the condition evaluated by a query. The batch's own
// earlier events are matched against the condition in decide, as always.
func implied(c *journal.AppendCondition, partition string, st *batchState) bool {
	q := c.FailIfEventsMatch
	if q.All || len(q.Items) == 0 || q.PartitionOrDefault() != partition {
		return false
	}
	for _, it := range q.Items {
		ok := false
		for _, t := range it.Tags {
			s := st.keys[streamKey{partition, string(t)}]
			if s != nil && s.claimed && !s.last.IsZero() && !s.last.After(c.After) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// fenceFailed reports the write statement's fence_check error or a unique
// violation (a stored event ID, or a tag version written by another writer).
func fenceFailed(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "SF001" || pgErr.Code == "23505")
}

// prefix queues BEGIN, the batch's advisory locks and the events table lock.
func (j *Journal) prefix(b *pgx.Batch, batch []*appendReq) int {
	locks := map[int64]bool{}
	for _, r := range batch {
		for k, x := range r.locks {
			locks[k] = locks[k] || x
		}
	}
	keys, modes := lockArgs(locks)
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(lockSQL, keys, modes)
	if !j.seam.ungatedOrder {
		b.Queue(j.sql(lockEventsSQL))
	}
	return b.Len()
}

// run executes batch and returns one outcome per append. With hold (one
// append only), the transaction is left open after the write and release
// commits it.
func (j *Journal) run(ctx context.Context, batch []*appendReq, hold bool) (outcomes []appendOutcome, release func() error) {
	start := time.Now()
	j.stats.batches.Add(1)
	j.stats.appends.Add(int64(len(batch)))
	for _, r := range batch {
		j.stats.events.Add(int64(len(r.events)))
	}
	defer func() { j.stats.batchNanos.Add(int64(time.Since(start))) }()
	failAll := func(err error) ([]appendOutcome, func() error) {
		out := make([]appendOutcome, len(batch))
		for i := range out {
			out[i] = appendOutcome{err: err}
		}
		return out, nil
	}
	conn, err := j.acquireLive(ctx)
	if err != nil {
		return failAll(j.translate("append: acquire connection", err))
	}
	keep := false
	defer func() {
		if !keep {
			conn.Release() // a connection left mid-transaction or broken is discarded by the pool
		}
	}()
	for attempt := 0; ; attempt++ {
		var st *batchState
		if attempt == 0 && !hold && !j.seam.readFirst {
			st = j.heads.known(batch)
		}
		direct := st != nil
		if direct {
			j.stats.direct.Add(1)
		} else {
			j.stats.read.Add(1)
		}
		if !direct {
			st, err = j.readState(ctx, conn, batch)
			if err != nil {
				if !isConnErr(err) {
					_, _ = conn.Exec(ctx, "ROLLBACK")
				}
				return failAll(j.fatalErr(err, false))
			}
		}
		d := j.decide(batch, st)
		if direct && (len(d.accepted) == 0 || len(d.acceptedIdx) < len(batch)) {
			// Something did not go as the remembered heads say: decide
			// on what the database holds.
			continue
		}
		if len(d.accepted) == 0 {
			if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
				conn.Conn().Close(ctx)
			}
			j.resolveDuplicates(ctx, batch, d.dups, d.outcomes)
			return d.outcomes, nil
		}
		fenced, err := j.write(ctx, conn, batch, st, &d, direct, hold)
		if fenced {
			j.stats.fenced.Add(1)
			j.heads.forget(batch)
			if attempt+1 < maxAttempts {
				continue
			}
			err = fmt.Errorf("%w: postgres: the batch's streams kept changing between its checks and its write (%d attempts); retry the append", journal.ErrVersionMismatch, maxAttempts)
		}
		if err != nil {
			j.heads.forget(batch)
			for mi := range batch {
				if _, ok := d.acceptedIdx[mi]; ok {
					d.outcomes[mi] = appendOutcome{err: err}
				}
			}
			// Duplicates of events that were to be written in this batch
			// are as uncertain as those events.
			for mi := range d.dups {
				d.outcomes[mi] = appendOutcome{err: err}
				delete(d.dups, mi)
			}
			j.resolveDuplicates(ctx, batch, d.dups, d.outcomes)
			return d.outcomes, nil
		}
		for mi, span := range d.acceptedIdx {
			d.outcomes[mi] = appendOutcome{res: journal.AppendResult{Records: d.accepted[span[0]:span[1]:span[1]]}}
		}
		if hold {
			keep = true
			return d.outcomes, func() error {
				defer conn.Release()
				if _, err := conn.Exec(context.WithoutCancel(ctx), "COMMIT"); err != nil {
					return j.fatalErr(err, isConnErr(err) && !pgconn.SafeToRetry(err))
				}
				j.learn(st, d.accepted)
				return nil
			}
		}
		j.learn(st, d.accepted)
		j.resolveDuplicates(ctx, batch, d.dups, d.outcomes)
		return d.outcomes, nil
	}
}

// learn remembers the committed heads of a batch's streams: versions, hashes
// and the positions of their newest events (accepted holds the batch's
// records with their positions).
func (j *Journal) learn(st *batchState, accepted []journal.Record) {
	for k, s := range st.keys {
		if !s.claimed {
			continue
		}
		hd := head{version: s.version, hash: s.head, last: s.last}
		if s.newest > 0 {
			hd.last = accepted[s.newest-1].Position
		}
		j.heads.learn(k, hd)
	}
}

// readState begins the transaction, takes the locks and reads what a decision
// needs, in one round trip.
func (j *Journal) readState(ctx context.Context, conn *pgxpool.Conn, batch []*appendReq) (*batchState, error) {
	st := &batchState{keys: map[streamKey]*fastStream{}, nodes: map[string]fastNode{}, existing: map[uuid.UUID]bool{}, condHit: make([]bool, len(batch))}
	var ids []uuid.UUID
	var keyParts, keyTags, nodeIDs []string
	for _, r := range batch {
		for i := range r.events {
			ids = append(ids, r.events[i].ID)
		}
		for _, c := range r.claims {
			k := streamKey{r.partition, c.tag}
			if st.keys[k] == nil {
				st.keys[k] = &fastStream{}
				keyParts = append(keyParts, k.partition)
				keyTags = append(keyTags, k.tag)
			}
			if c.lease != nil {
				nodeIDs = append(nodeIDs, c.lease.NodeID)
			}
		}
	}
	b := &pgx.Batch{}
	nExec := j.prefix(b, batch)
	b.Queue(j.sql(precheckSQL), uuidArray(ids))
	b.Queue(j.sql(fastStateSQL), keyParts, keyTags)
	if len(nodeIDs) > 0 {
		b.Queue(j.sql(fastNodesSQL), nodeIDs)
	}
	for _, r := range batch {
		if r.opts.Condition != nil {
			q, a := j.conditionQuery(r.opts.Condition)
			b.Queue(q, a...)
		}
	}
	br := conn.SendBatch(ctx, b)
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
			var id uuid.UUID
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			st.existing[id] = true
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				k        streamKey
				s        fastStream
				v        int64
				head     []byte
				lc, lseq pgtype.Int8
			)
			if err := rows.Scan(&k.partition, &k.tag, &v, &head, &s.node, &s.inc, &s.epoch, &s.released, &lc, &lseq, &s.retired); err != nil {
				rows.Close()
				return err
			}
			s.exists, s.before, s.version = true, uint64(v), uint64(v)
			if lc.Valid && lseq.Valid && v > 0 {
				s.last = journal.Position{Commit: uint64(lc.Int64), Seq: uint64(lseq.Int64)}
			}
			copy(s.head[:], head)
			*st.keys[k] = s
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(nodeIDs) > 0 {
			rows, err = br.Query()
			if err != nil {
				return err
			}
			for rows.Next() {
				var id string
				var n fastNode
				if err := rows.Scan(&id, &n.inc, &n.closed, &n.live); err != nil {
					rows.Close()
					return err
				}
				st.nodes[id] = n
			}
			if err := rows.Err(); err != nil {
				return err
			}
		}
		for i, r := range batch {
			if r.opts.Condition != nil {
				if err := br.QueryRow().Scan(&st.condHit[i]); err != nil {
					return err
				}
			}
		}
		return nil
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return st, err
}

// decide judges each append of batch in order against st, as if they ran one
// after the other: duplicates, leases, expected versions (against the running
// versions), conditions (the database's answer, plus the batch's earlier
// accepted events). Accepted events are linked into their hash chains and
// advance st's running stream states.
func (j *Journal) decide(batch []*appendReq, st *batchState) decision {
	d := decision{outcomes: make([]appendOutcome, len(batch)), acceptedIdx: map[int][2]int{}, dups: map[int]bool{}}
	now := j.cfg.Clock().UTC().Truncate(time.Microsecond)
	batchIDs := map[uuid.UUID]bool{}
	for mi, r := range batch {
		inDB, inBatch := 0, 0
		for i := range r.events {
			if st.existing[r.events[i].ID] {
				inDB++
			}
			if batchIDs[r.events[i].ID] {
				inBatch++
			}
		}
		switch {
		case inDB == len(r.events) || inBatch == len(r.events):
			d.dups[mi] = true
			continue
		case inDB+inBatch > 0:
			d.outcomes[mi] = appendOutcome{err: fmt.Errorf("%w: %d of the append's %d event IDs are already stored; an append is idempotent only as a whole: retry it with exactly the same events, or use fresh IDs", journal.ErrDuplicateMismatch, inDB+inBatch, len(r.events))}
			continue
		}
		if err := checkClaims(r, st.keys, st.nodes); err != nil {
			d.outcomes[mi] = appendOutcome{err: err}
			continue
		}
		if st.condHit[mi] {
			d.outcomes[mi] = appendOutcome{err: fmt.Errorf("%w: an event matching the condition's query exists after position %s; read again and decide on the newer events", journal.ErrAppendConditionFailed, r.opts.Condition.After)}
			continue
		}
		if c := r.opts.Condition; c != nil {
			hit := false
			for i := range d.accepted {
				if c.FailIfEventsMatch.Matches(&d.accepted[i]) {
					hit = true
					break
				}
			}
			if hit {
				d.outcomes[mi] = appendOutcome{err: fmt.Errorf("%w: an event matching the condition's query was appended concurrently after position %s; read again and decide on the newer events", journal.ErrAppendConditionFailed, c.After)}
				continue
			}
		}
		from := len(d.accepted)
		for i := range r.events {
			rec := journal.Record{Event: r.events[i], RecordedAt: now}
			journal.LinkRecord(&rec, func(t journal.Tag) (uint64, journal.Hash) {
				s := st.keys[streamKey{r.partition, string(t)}]
				return s.version, s.head
			})
			for _, l := range rec.Links {
				s := st.keys[streamKey{r.partition, string(l.Tag)}]
				s.version, s.head = l.Version, l.Hash
				s.n++
				s.newest = len(d.accepted) + 1 // rec's index, appended below
			}
			batchIDs[rec.ID] = true
			d.accepted = append(d.accepted, rec)
		}
		for _, c := range r.claims {
			s := st.keys[streamKey{r.partition, c.tag}]
			s.claimed = true
			if c.lease != nil {
				l := *c.lease
				s.lease = &l
			}
		}
		d.acceptedIdx[mi] = [2]int{from, len(d.accepted)}
	}
	return d
}

// checkClaims checks r's leases and expected versions against the running
// stream states, by the journal's fence rule (journal.CheckLease,
// journal.CheckExpected). With nodes nil (a direct attempt) leases are left to
// the database. A claim of a retired stream fails with a
// *journal.StreamRetiredError, whatever else it carries.
func checkClaims(r *appendReq, keys map[streamKey]*fastStream, nodes map[string]fastNode) error {
	var errs []error
	for _, c := range r.claims {
		s := keys[streamKey{r.partition, c.tag}]
		id := journal.StreamID{Partition: r.partition, Tag: journal.Tag(c.tag)}
		if s.retired {
			errs = append(errs, &journal.StreamRetiredError{Stream: id, Version: s.before})
			continue
		}
		if l := c.lease; l != nil && nodes != nil {
			st := journal.LeaseState{Acquired: s.exists && s.node != nil, Epoch: uint64(s.epoch), Released: s.released}
			if s.node != nil {
				st.NodeID = *s.node
			}
			if s.inc != nil {
				st.Incarnation = uint64(*s.inc)
			}
			nr, found := nodes[l.NodeID]
			ns := journal.NodeState{Found: found, Incarnation: uint64(nr.inc), Closed: nr.closed, Live: nr.live}
			if err := journal.CheckLease(*l, st, ns); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if c.expect >= 0 {
			if err := journal.CheckExpected(id, uint64(c.expect), s.version); err != nil {
				errs = append(errs, err)
			}
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

// write sends the write statement (and COMMIT unless hold) for d's accepted
// records, after BEGIN, the locks and the condition assertions when direct,
// and fills in the records' positions. fenced reports that the database
// found a stream, lease or event ID other than decided on: the transaction
// was rolled back and nothing was written. Any other error is final for the
// accepted appends (ErrOutcomeUnknown when COMMIT may have run).
func (j *Journal) write(ctx context.Context, conn *pgxpool.Conn, batch []*appendReq, st *batchState, d *decision, direct, hold bool) (fenced bool, err error) {
	args, err := writeArgs(st, d.accepted)
	if err != nil {
		_, _ = conn.Exec(ctx, "ROLLBACK")
		return false, err
	}
	if err := j.seam.at(ctx, seamAfterChecks, conn); err != nil {
		return false, j.fatalErr(err, false)
	}
	b := &pgx.Batch{}
	nExec := 0
	if direct {
		nExec = j.prefix(b, batch)
		for _, r := range batch {
			if c := r.opts.Condition; c != nil {
				if implied(c, r.partition, st) {
					j.stats.implied.Add(1)
					continue
				}
				q, a := j.conditionQuery(c)
				b.Queue(j.assertSQL(q), a...)
				nExec++
			}
		}
	}
	ws := j.sql(writeSQL)
	if j.seam.ungatedOrder {
		ws = strings.Replace(ws, "pg_current_xact_id()::text::bigint", "0::bigint", 1)
	}
	b.Queue(ws, args...)
	commitInPipeline := !hold && !j.seam.has(seamBeforeCommit)
	if commitInPipeline {
		b.Queue("COMMIT")
	}
	var (
		xid      int64
		seqs     []int64
		ne, nt   int64
		wantTags int
	)
	for i := range d.accepted {
		wantTags += len(d.accepted[i].Links)
	}
	sent := time.Now()
	defer func() { j.stats.writeNanos.Add(int64(time.Since(sent))) }()
	br := conn.SendBatch(ctx, b)
	writeDone := false
	err = func() error {
		for range nExec {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if err := br.QueryRow().Scan(&xid, &seqs, &ne, &nt); err != nil {
			return err
		}
		if int(ne) != len(d.accepted) || int(nt) != wantTags || len(seqs) != len(d.accepted) {
			return fmt.Errorf("postgres: append: wrote %d events and %d tag rows, want %d and %d", ne, nt, len(d.accepted), wantTags)
		}
		writeDone = true
		if commitInPipeline {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return nil
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && !commitInPipeline && !hold {
		if err = j.seam.at(ctx, seamBeforeCommit, conn); err == nil {
			_, err = conn.Exec(ctx, "COMMIT")
		}
		if err != nil && isConnErr(err) {
			return false, j.fatalErr(err, !pgconn.SafeToRetry(err))
		}
	}
	if err != nil {
		if !isConnErr(err) {
			_, rerr := conn.Exec(ctx, "ROLLBACK")
			if !writeDone && fenceFailed(err) && rerr == nil {
				return true, nil
			}
			return false, j.translate("append", err)
		}
		var pgErr *pgconn.PgError
		definite := !commitInPipeline || (!writeDone && (errors.As(err, &pgErr) || pgconn.SafeToRetry(err)))
		return false, j.fatalErr(err, !definite)
	}
	for i := range d.accepted {
		d.accepted[i].Position = journal.Position{Commit: uint64(xid), Seq: uint64(seqs[i])}
	}
	return false, nil
}

// writeArgs returns writeSQL's arguments for the accepted records. The
// arrays are pgtype.FlatArray values of types pgx encodes in binary directly
// (a []uuid.UUID would go through uuid's driver.Valuer, text and back, at
// several allocations per element).
func writeArgs(st *batchState, accepted []journal.Record) ([]any, error) {
	n := len(accepted)
	var (
		cPart, cTag  pgtype.FlatArray[string]
		cN, cBefore  pgtype.FlatArray[int64]
		cNode        pgtype.FlatArray[pgtype.Text]
		cInc, cEpoch pgtype.FlatArray[pgtype.Int8]
		cHead        pgtype.FlatArray[[]byte]
		cLast, cSeq  pgtype.FlatArray[pgtype.Int8]
		eID          = make(pgtype.FlatArray[pgtype.UUID], n)
		ePart, eType = make(pgtype.FlatArray[string], n), make(pgtype.FlatArray[string], n)
		eSV          = make(pgtype.FlatArray[int32], n)
		eData, eMeta = make(pgtype.FlatArray[[]byte], n), make(pgtype.FlatArray[[]byte], n)
		eCorr        = make(pgtype.FlatArray[pgtype.Text], n)
		eAt          = make(pgtype.FlatArray[time.Time], n)
		ePrev, eHash = make(pgtype.FlatArray[[]byte], n), make(pgtype.FlatArray[[]byte], n)
		tEv          = make(pgtype.FlatArray[int32], 0, n)
		tTag         = make(pgtype.FlatArray[string], 0, n)
		tVersion     = make(pgtype.FlatArray[int64], 0, n)
	)
	for k, s := range st.keys {
		// Every stream an accepted append claims is checked, also one it
		// only expects a version of: the decision may rest on this
		// journal's memory of the stream's head, which another process's
		// append makes stale.
		if !s.claimed {
			continue
		}
		cPart, cTag = append(cPart, k.partition), append(cTag, k.tag)
		cN, cBefore = append(cN, s.n), append(cBefore, int64(s.before))
		h := s.head
		cHead = append(cHead, h[:])
		if s.last.IsZero() {
			cLast, cSeq = append(cLast, pgtype.Int8{}), append(cSeq, pgtype.Int8{})
		} else {
			cLast = append(cLast, pgtype.Int8{Int64: int64(s.last.Commit), Valid: true})
			cSeq = append(cSeq, pgtype.Int8{Int64: int64(s.last.Seq), Valid: true})
		}
		if s.lease != nil {
			cNode = append(cNode, pgtype.Text{String: s.lease.NodeID, Valid: true})
			cInc = append(cInc, pgtype.Int8{Int64: int64(s.lease.Incarnation), Valid: true})
			cEpoch = append(cEpoch, pgtype.Int8{Int64: int64(s.lease.Epoch), Valid: true})
		} else {
			cNode, cInc, cEpoch = append(cNode, pgtype.Text{}), append(cInc, pgtype.Int8{}), append(cEpoch, pgtype.Int8{})
		}
	}
	const hashLen = len(journal.Hash{})
	for i := range accepted {
		rec := &accepted[i]
		// The partition has its own column (scanRecord fills it in): the
		// metadata JSON leaves it out, 22 bytes less per event.
		md := rec.Metadata
		md.Partition = ""
		meta := journal.AppendMetadataJSON(nil, &md)
		if len(meta) == 0 {
			// AppendMetadataJSON appends nothing where json.Marshal fails (a
			// CreatedAt with no RFC 3339 form); json.Marshal gives the error.
			_, err := json.Marshal(md)
			return nil, fmt.Errorf("postgres: append: encode metadata: %w", err)
		}
		// One buffer holds both hash runs of the event.
		hb := make([]byte, 2*len(rec.Links)*hashLen)
		prev, hashes := hb[:0:len(rec.Links)*hashLen], hb[len(rec.Links)*hashLen:len(rec.Links)*hashLen]
		for _, l := range rec.Links {
			prev = append(prev, l.PrevHash[:]...)
			hashes = append(hashes, l.Hash[:]...)
			tEv = append(tEv, int32(i+1))
			tTag = append(tTag, string(l.Tag))
			tVersion = append(tVersion, int64(l.Version))
		}
		if c := rec.Metadata.CorrelationID; c != "" {
			eCorr[i] = pgtype.Text{String: c, Valid: true}
		}
		eID[i] = pgtype.UUID{Bytes: rec.ID, Valid: true}
		ePart[i], eType[i], eSV[i] = rec.Metadata.Partition, rec.Type, int32(rec.SchemaVersion)
		eData[i], eMeta[i], eAt[i] = rec.Data, meta, rec.RecordedAt
		ePrev[i], eHash[i] = prev, hashes
	}
	return []any{cPart, cTag, cN, cBefore, cNode, cInc, cEpoch, cHead, len(cPart),
		eID, ePart, eType, eSV, eData, eMeta, eCorr, eAt, ePrev, eHash, tEv, tTag, tVersion, cLast, cSeq}, nil
}

// uuidArray returns ids as a uuid[] argument pgx encodes in binary directly.
func uuidArray(ids []uuid.UUID) pgtype.FlatArray[pgtype.UUID] {
	out := make(pgtype.FlatArray[pgtype.UUID], len(ids))
	for i, id := range ids {
		out[i] = pgtype.UUID{Bytes: id, Valid: true}
	}
	return out
}

// resolveDuplicates reads the stored records of the appends in dups.
func (j *Journal) resolveDuplicates(ctx context.Context, batch []*appendReq, dups map[int]bool, outcomes []appendOutcome) {
	for mi := range dups {
		recs, err := j.recordsByID(ctx, j.pool, batch[mi].events)
		if err != nil {
			outcomes[mi] = appendOutcome{err: err}
			continue
		}
		outcomes[mi] = appendOutcome{res: journal.AppendResult{Records: recs, Duplicate: true}}
	}
}

// acquireLive takes a pooled connection whose server end is not already known
// closed. A pooled connection can outlive its server end (a restarted
// database, a proxy or load balancer that dropped it); an append sent on one
// can only end in journal.ErrOutcomeUnknown, since its COMMIT went out and no
// answer came back. So each acquired connection is first checked
// (closedByPeer: one non-blocking peek at its socket), and a closed one is
// discarded for the next, at most once per pooled connection plus one new
// connection. An error from the pool (no connection could be made) or the
// end of ctx is returned as is.
func (j *Journal) acquireLive(ctx context.Context) (*pgxpool.Conn, error) {
	tries := int(j.pool.Config().MaxConns) + 1
	for i := 0; ; i++ {
		conn, err := j.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		if i+1 >= tries || !closedByPeer(ctx, conn.Conn().PgConn()) {
			j.server.observe(conn, j.cfg.Logger)
			return conn, nil
		}
		j.server.lost()
		if err := ctx.Err(); err != nil {
			conn.Release()
			return nil, err
		}
		j.stats.discarded.Add(1)
		// Closing marks the connection closed, so Release destroys it.
		cctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_ = conn.Conn().Close(cctx)
		cancel()
		conn.Release()
	}
}

// closedByPeer reports whether pc's server end is already known closed. The
// socket may only be peeked at when pgconn reads nothing in the background
// and holds no buffered input: after a write that took longer than 15 ms,
// pgconn leaves a background read pending on the socket, and a peek would
// wait for it. SyncConn settles that (immediately in the usual case, with one
// ping round trip after such a write); a connection it cannot settle counts
// as closed.
func closedByPeer(ctx context.Context, pc *pgconn.PgConn) bool {
	if err := pc.SyncConn(ctx); err != nil {
		return true
	}
	return peerClosed(pc.Conn())
}

// forgetStream drops what the cache remembers of one stream.
func (h *heads) forgetStream(k streamKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, k)
}
