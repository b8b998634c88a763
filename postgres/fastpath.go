package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/scribe-es/scribe/journal"
)

// The fast path runs a whole batch of appends (one or many) in two round trips
// and a fixed number of statements:
//
//  1. BEGIN; the batch's advisory locks; LOCK events; draw the transaction ID
//     and one sequence number per event; read which event IDs exist, the
//     touched streams (version, head, lease) and the lease nodes; run each
//     condition's check. Under the locks no other append can change any of it.
//  2. In Go, decide each append in order as if they ran one after the other:
//     duplicates, leases, expected versions (against the running versions),
//     conditions (the database's answer, plus the batch's earlier accepted
//     events); link the accepted events into their hash chains.
//  3. One statement claims the streams of all accepted appends — rechecking
//     every lease holder, epoch, release and node expiry by the database clock
//     and every stream version in the same statement — and inserts their
//     events; fence_check aborts it if any stream fails. Then COMMIT.
//
// If the write statement fails (a lease expired or was taken between 1 and 3),
// the transaction is rolled back and the batch reruns on the slow path, one
// savepoint per append, which reports each append's own error.

// fastStream is a stream's state read in step 1, and its running state.
type fastStream struct {
	exists    bool
	before    uint64 // version read in step 1
	version   uint64 // running version
	head      journal.Hash
	node      *string
	inc       *int64
	epoch     int64
	released  bool
	lease     *journal.Lease // the lease the accepted appends carry
	n         int64
	first     *journal.Position
	last      *journal.Position
	leaseOnly bool
}

type fastNode struct {
	inc    int64
	closed bool
	live   bool
}

type streamKey struct{ partition, tag string }

const fastStateSQL = `SELECT s.partition, s.tag, s.version, s.head_hash, s.lease_node, s.lease_incarnation, s.epoch, s.released
FROM unnest($1::text[], $2::text[]) AS k(partition, tag)
JOIN __S__.streams s ON s.partition = k.partition AND s.tag = k.tag`

const fastNodesSQL = `SELECT node_id, incarnation, closed, expires_at > clock_timestamp() FROM __S__.nodes WHERE node_id = ANY($1::text[])`

const fastPositionsSQL = `SELECT pg_current_xact_id()::text::bigint, ARRAY(SELECT nextval('__S__.events_seq') FROM generate_series(1, $1::int))`

// fastWriteSQL claims the streams and inserts the events of the accepted
// appends; see the fast path comment.
const fastWriteSQL = `WITH c AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::bigint[], $7::bigint[], $8::bytea[],
		$9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[])
		AS c(partition, tag, n, before, node, inc, epoch, head, first_commit, first_seq, last_commit, last_seq)
), claimed AS (
	UPDATE __S__.streams s SET version = s.version + c.n,
		head_hash = CASE WHEN c.n > 0 THEN c.head ELSE s.head_hash END,
		first_commit = coalesce(s.first_commit, c.first_commit), first_seq = coalesce(s.first_seq, c.first_seq),
		last_commit = coalesce(c.last_commit, s.last_commit), last_seq = coalesce(c.last_seq, s.last_seq)
	FROM c
	WHERE s.partition = c.partition AND s.tag = c.tag AND s.version = c.before
	  AND (c.node IS NULL OR (
		s.lease_node = c.node AND s.lease_incarnation = c.inc AND s.epoch = c.epoch AND NOT s.released
		AND EXISTS (SELECT 1 FROM __S__.nodes n WHERE n.node_id = c.node AND n.incarnation = c.inc
			AND NOT n.closed AND n.expires_at > clock_timestamp())))
	RETURNING 1
), created AS (
	INSERT INTO __S__.streams (partition, tag, version, head_hash, first_commit, first_seq, last_commit, last_seq)
	SELECT c.partition, c.tag, c.n, c.head, c.first_commit, c.first_seq, c.last_commit, c.last_seq FROM c
	WHERE c.before = 0 AND c.node IS NULL
	  AND NOT EXISTS (SELECT 1 FROM __S__.streams s WHERE s.partition = c.partition AND s.tag = c.tag)
	ON CONFLICT DO NOTHING
	RETURNING 1
), fence AS (
	SELECT __S__.fence_check((SELECT count(*) FROM claimed) + (SELECT count(*) FROM created) = $13) AS ok
), ev_in AS (
	SELECT * FROM unnest($14::bigint[], $15::uuid[], $16::text[], $17::text[], $18::int[], $19::bytea[], $20::bytea[], $21::text[],
		$22::timestamptz[], $23::bytea[], $24::bytea[])
		WITH ORDINALITY AS u(seq, id, partition, type, sv, data, metadata, corr, recorded_at, prev_hashes, hashes, ord)
), tg_in AS (
	SELECT * FROM unnest($25::int[], $26::text[], $27::bigint[]) WITH ORDINALITY AS t(ev, tag, version, k)
), tg_agg AS (
	SELECT ev, array_agg(tag ORDER BY k) AS tags, array_agg(version ORDER BY k) AS versions FROM tg_in GROUP BY ev
), ev AS (
	INSERT INTO __S__.events (commit_xid, seq, id, partition, type, schema_version, tags, versions, prev_hashes, hashes,
		data, metadata, correlation_id, recorded_at)
	SELECT $28, u.seq, u.id, u.partition, u.type, u.sv,
		coalesce(g.tags, '{}'), coalesce(g.versions, '{}'),
		u.prev_hashes, u.hashes, u.data, u.metadata, u.corr, u.recorded_at
	FROM ev_in u LEFT JOIN tg_agg g ON g.ev = u.ord WHERE (SELECT ok FROM fence)
	RETURNING 1
), et AS (
	INSERT INTO __S__.event_tags (partition, tag, version, commit_xid, seq, type)
	SELECT u.partition, t.tag, t.version, $28, u.seq, u.type
	FROM tg_in t JOIN ev_in u ON u.ord = t.ev WHERE (SELECT ok FROM fence)
	RETURNING 1
)
SELECT (SELECT count(*) FROM ev), (SELECT count(*) FROM et)`

// fenceFailed reports the write statement's fence_check error.
func fenceFailed(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "SF001" || pgErr.Code == "23505")
}

// runFast runs batch on the fast path and returns one outcome per append. It
// returns fallback=true (and no outcomes) when the batch must rerun on the
// slow path; nothing was written then.
func (j *Journal) runFast(ctx context.Context, batch []*appendReq) (outcomes []appendOutcome, fallback bool) {
	outcomes = make([]appendOutcome, len(batch))
	failAll := func(err error) ([]appendOutcome, bool) {
		for i := range outcomes {
			outcomes[i] = appendOutcome{err: err}
		}
		return outcomes, false
	}
	conn, err := j.pool.Acquire(ctx)
	if err != nil {
		return failAll(j.translate("append: acquire connection", err))
	}
	defer conn.Release() // a connection left mid-transaction or broken is discarded by the pool

	// Step 1.
	locks := map[int64]bool{}
	var (
		ids      []uuid.UUID
		keyParts []string
		keyTags  []string
		nodeIDs  []string
		total    int
	)
	keys := map[streamKey]*fastStream{}
	for _, r := range batch {
		for k, x := range r.locks {
			locks[k] = locks[k] || x
		}
		for i := range r.events {
			ids = append(ids, r.events[i].ID)
		}
		total += len(r.events)
		for _, c := range r.claims {
			k := streamKey{r.partition, c.tag}
			if keys[k] == nil {
				keys[k] = &fastStream{}
				keyParts = append(keyParts, k.partition)
				keyTags = append(keyTags, k.tag)
			}
			if c.lease != nil {
				nodeIDs = append(nodeIDs, c.lease.NodeID)
			}
		}
	}
	lockKeys, lockModes := lockArgs(locks)
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(lockSQL, lockKeys, lockModes)
	posSQL := j.sql(fastPositionsSQL)
	if j.hooks.ungatedOrder {
		posSQL = j.sql(`SELECT 0::bigint, ARRAY(SELECT nextval('__S__.events_seq') FROM generate_series(1, $1::int))`)
	} else {
		b.Queue(j.sql(lockEventsSQL))
	}
	nExec := b.Len()
	b.Queue(posSQL, total)
	b.Queue(j.sql(precheckSQL), ids)
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
	var (
		xid      int64
		seqs     []int64
		existing = map[uuid.UUID]bool{}
		nodes    = map[string]fastNode{}
		condHit  = make([]bool, len(batch))
	)
	br := conn.SendBatch(ctx, b)
	err = func() error {
		for range nExec {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if err := br.QueryRow().Scan(&xid, &seqs); err != nil {
			return err
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
			existing[id] = true
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
				k    streamKey
				s    fastStream
				v    int64
				head []byte
			)
			if err := rows.Scan(&k.partition, &k.tag, &v, &head, &s.node, &s.inc, &s.epoch, &s.released); err != nil {
				rows.Close()
				return err
			}
			s.exists, s.before, s.version = true, uint64(v), uint64(v)
			copy(s.head[:], head)
			*keys[k] = s
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
				nodes[id] = n
			}
			if err := rows.Err(); err != nil {
				return err
			}
		}
		for i, r := range batch {
			if r.opts.Condition != nil {
				if err := br.QueryRow().Scan(&condHit[i]); err != nil {
					return err
				}
			}
		}
		return nil
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if !isConnErr(err) {
			_, _ = conn.Exec(ctx, "ROLLBACK")
		}
		return failAll(j.fatalErr(err, false))
	}

	// Step 2.
	now := j.cfg.Clock().UTC().Truncate(time.Microsecond)
	batchIDs := map[uuid.UUID]bool{}
	var accepted []journal.Record // the batch's accepted records so far
	dups := map[int]bool{}
	acceptedIdx := map[int][2]int{} // member -> [from, to) in accepted
	next := 0                       // next unused sequence number
	for mi, r := range batch {
		inDB, inBatch := 0, 0
		for i := range r.events {
			if existing[r.events[i].ID] {
				inDB++
			}
			if batchIDs[r.events[i].ID] {
				inBatch++
			}
		}
		switch {
		case inDB == len(r.events) || inBatch == len(r.events):
			dups[mi] = true
			continue
		case inDB+inBatch > 0:
			outcomes[mi] = appendOutcome{err: fmt.Errorf("%w: %d of the append's %d event IDs are already stored; an append is idempotent only as a whole: retry it with exactly the same events, or use fresh IDs", journal.ErrDuplicateMismatch, inDB+inBatch, len(r.events))}
			continue
		}
		if err := j.fastCheck(r, keys, nodes); err != nil {
			outcomes[mi] = appendOutcome{err: err}
			continue
		}
		if condHit[mi] {
			outcomes[mi] = appendOutcome{err: fmt.Errorf("%w: an event matching the condition's query exists after position %s; read again and decide on the newer events", journal.ErrAppendConditionFailed, r.opts.Condition.After)}
			continue
		}
		if c := r.opts.Condition; c != nil {
			hit := false
			for i := range accepted {
				if c.FailIfEventsMatch.Matches(&accepted[i]) {
					hit = true
					break
				}
			}
			if hit {
				outcomes[mi] = appendOutcome{err: fmt.Errorf("%w: an event matching the condition's query was appended concurrently after position %s; read again and decide on the newer events", journal.ErrAppendConditionFailed, c.After)}
				continue
			}
		}
		// Accept: link the records and advance the running stream states.
		from := len(accepted)
		for i := range r.events {
			rec := journal.Record{Event: r.events[i], RecordedAt: now}
			journal.LinkRecord(&rec, func(t journal.Tag) (uint64, journal.Hash) {
				s := keys[streamKey{r.partition, string(t)}]
				return s.version, s.head
			})
			rec.Position = journal.Position{Commit: uint64(xid), Seq: uint64(seqs[next])}
			next++
			for _, l := range rec.Links {
				s := keys[streamKey{r.partition, string(l.Tag)}]
				s.version, s.head = l.Version, l.Hash
				s.n++
				p := rec.Position
				if s.first == nil {
					s.first = &p
				}
				s.last = &p
			}
			batchIDs[rec.ID] = true
			accepted = append(accepted, rec)
		}
		for _, c := range r.claims {
			if c.lease != nil {
				s := keys[streamKey{r.partition, c.tag}]
				l := *c.lease
				s.lease = &l
			}
		}
		acceptedIdx[mi] = [2]int{from, len(accepted)}
	}

	if len(accepted) == 0 {
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			conn.Conn().Close(ctx)
		}
		j.resolveDuplicates(ctx, batch, dups, outcomes)
		return outcomes, false
	}

	// Step 3.
	var (
		cPart, cTag        []string
		cN, cBefore        []int64
		cNode              []*string
		cInc, cEpoch       []*int64
		cHead              [][]byte
		cFC, cFS, cLC, cLS []*int64
		eSeq               []int64
		eID                []uuid.UUID
		ePart, eType       []string
		eSV                []int32
		eData, eMeta       [][]byte
		eCorr              []*string
		eAt                []time.Time
		ePrev, eHash       [][]byte
		tEv                []int32
		tTag               []string
		tVersion           []int64
	)
	for k, s := range keys {
		if s.n == 0 && s.lease == nil {
			continue
		}
		cPart, cTag = append(cPart, k.partition), append(cTag, k.tag)
		cN, cBefore = append(cN, s.n), append(cBefore, int64(s.before))
		h := s.head
		cHead = append(cHead, h[:])
		if s.lease != nil {
			node, inc, ep := s.lease.NodeID, int64(s.lease.Incarnation), int64(s.lease.Epoch)
			cNode, cInc, cEpoch = append(cNode, &node), append(cInc, &inc), append(cEpoch, &ep)
		} else {
			cNode, cInc, cEpoch = append(cNode, nil), append(cInc, nil), append(cEpoch, nil)
		}
		ptr := func(p *journal.Position) (*int64, *int64) {
			if p == nil {
				return nil, nil
			}
			c, q := int64(p.Commit), int64(p.Seq)
			return &c, &q
		}
		fc, fs := ptr(s.first)
		lc, ls := ptr(s.last)
		cFC, cFS, cLC, cLS = append(cFC, fc), append(cFS, fs), append(cLC, lc), append(cLS, ls)
	}
	for i := range accepted {
		rec := &accepted[i]
		meta, err := json.Marshal(rec.Metadata)
		if err != nil {
			_, _ = conn.Exec(ctx, "ROLLBACK")
			return failAll(fmt.Errorf("postgres: append: encode metadata: %w", err))
		}
		var prev, hashes bytes.Buffer
		for _, l := range rec.Links {
			prev.Write(l.PrevHash[:])
			hashes.Write(l.Hash[:])
			tEv = append(tEv, int32(i+1))
			tTag = append(tTag, string(l.Tag))
			tVersion = append(tVersion, int64(l.Version))
		}
		var corr *string
		if rec.Metadata.CorrelationID != "" {
			c := rec.Metadata.CorrelationID
			corr = &c
		}
		eSeq = append(eSeq, int64(rec.Position.Seq))
		eID = append(eID, rec.ID)
		ePart = append(ePart, rec.Metadata.Partition)
		eType = append(eType, rec.Type)
		eSV = append(eSV, int32(rec.SchemaVersion))
		eData = append(eData, rec.Data)
		eMeta = append(eMeta, meta)
		eCorr = append(eCorr, corr)
		eAt = append(eAt, now)
		ePrev = append(ePrev, append([]byte{}, prev.Bytes()...))
		eHash = append(eHash, append([]byte{}, hashes.Bytes()...))
	}
	if j.hooks.afterChecks != nil {
		if err := j.hooks.afterChecks(ctx, conn); err != nil {
			return failAll(j.fatalErr(err, false))
		}
	}
	b = &pgx.Batch{}
	b.Queue(j.sql(fastWriteSQL), cPart, cTag, cN, cBefore, cNode, cInc, cEpoch, cHead, cFC, cFS, cLC, cLS, len(cPart),
		eSeq, eID, ePart, eType, eSV, eData, eMeta, eCorr, eAt, ePrev, eHash, tEv, tTag, tVersion, xid)
	commitInPipeline := j.hooks.beforeCommit == nil
	if commitInPipeline {
		b.Queue("COMMIT")
	}
	br = conn.SendBatch(ctx, b)
	writeDone := false
	err = func() error {
		var ne, nt int64
		if err := br.QueryRow().Scan(&ne, &nt); err != nil {
			return err
		}
		if int(ne) != len(accepted) || int(nt) != len(tEv) {
			return fmt.Errorf("postgres: append: wrote %d events and %d tag rows, want %d and %d", ne, nt, len(accepted), len(tEv))
		}
		writeDone = true
		for range b.Len() - 1 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return nil
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && !commitInPipeline {
		if err = j.hooks.beforeCommit(ctx, conn); err == nil {
			_, err = conn.Exec(ctx, "COMMIT")
		}
		if err != nil && isConnErr(err) {
			err = j.fatalErr(err, !pgconn.SafeToRetry(err))
			for mi := range batch {
				if _, ok := acceptedIdx[mi]; ok {
					outcomes[mi] = appendOutcome{err: err}
				}
			}
			for mi := range dups {
				outcomes[mi] = appendOutcome{err: err}
			}
			return outcomes, false
		}
	}
	if err != nil {
		if !isConnErr(err) {
			_, rerr := conn.Exec(ctx, "ROLLBACK")
			if !writeDone && fenceFailed(err) && rerr == nil {
				return nil, true
			}
			err = j.translate("append", err)
		} else {
			var pgErr *pgconn.PgError
			definite := !writeDone && (errors.As(err, &pgErr) || pgconn.SafeToRetry(err))
			err = j.fatalErr(err, !definite)
		}
		for mi := range batch {
			if _, ok := acceptedIdx[mi]; ok {
				outcomes[mi] = appendOutcome{err: err}
			}
		}
		// Duplicates of events that were to be written in this batch are
		// as uncertain as those events.
		for mi := range dups {
			outcomes[mi] = appendOutcome{err: err}
			delete(dups, mi)
		}
		j.resolveDuplicates(ctx, batch, dups, outcomes)
		return outcomes, false
	}
	for mi, span := range acceptedIdx {
		outcomes[mi] = appendOutcome{res: journal.AppendResult{Records: accepted[span[0]:span[1]:span[1]]}}
	}
	j.resolveDuplicates(ctx, batch, dups, outcomes)
	return outcomes, false
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

// fastCheck checks r's leases and expected versions against the running
// stream states.
func (j *Journal) fastCheck(r *appendReq, keys map[streamKey]*fastStream, nodes map[string]fastNode) error {
	var errs []error
	for _, c := range r.claims {
		s := keys[streamKey{r.partition, c.tag}]
		id := journal.StreamID{Partition: r.partition, Tag: journal.Tag(c.tag)}
		if l := c.lease; l != nil {
			nr, found := nodes[l.NodeID]
			var err error
			switch {
			case !found || nr.inc != int64(l.Incarnation):
				err = &journal.SessionError{Stream: id, Err: journal.ErrInvalidSession,
					Detail: fmt.Sprintf("node %s incarnation %d was superseded by a newer incarnation; the stream must be reacquired", l.NodeID, l.Incarnation)}
			case nr.closed:
				err = &journal.SessionError{Stream: id, Err: journal.ErrInvalidSession,
					Detail: fmt.Sprintf("node session %s incarnation %d was closed; open a new node session and reacquire the stream", l.NodeID, l.Incarnation)}
			case !s.exists || s.node == nil || *s.node != l.NodeID || s.inc == nil || *s.inc != int64(l.Incarnation) || s.epoch != int64(l.Epoch):
				err = &journal.SessionError{Stream: id, Err: journal.ErrInvalidSession,
					Detail: fmt.Sprintf("the lease (epoch %d) is no longer current: the stream's epoch is %d; another writer acquired it, so stop writing and reacquire", l.Epoch, s.epoch)}
			case s.released:
				err = &journal.SessionError{Stream: id, Err: journal.ErrInvalidSession,
					Detail: fmt.Sprintf("the lease (epoch %d) was released; acquire the stream again before appending", l.Epoch)}
			case !nr.live:
				err = &journal.SessionError{Stream: id, Err: journal.ErrSessionExpired,
					Detail: fmt.Sprintf("node session %s incarnation %d expired; renew node sessions well before their timeout", l.NodeID, l.Incarnation)}
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if c.expect >= 0 && s.version != uint64(c.expect) {
			errs = append(errs, &journal.VersionMismatchError{Stream: id, Expected: uint64(c.expect), Actual: s.version})
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
