package pgadmin

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// Read-only queries for operators that the journal contract has no call
// for: stream listings, leases and node sessions. None of them writes, takes
// a lock beyond a plain snapshot read, or is on the append path.

// StreamsQuery selects streams for Admin.Streams.
type StreamsQuery struct {
	// Partition limits the listing to one partition; "" lists every partition.
	Partition string
	// TagPrefix limits the listing to tags that start with it ("account:").
	TagPrefix string
	// After resumes a listing: only streams ordered after it (by partition,
	// then tag, byte order) are returned. Zero starts at the beginning.
	After journal.StreamID
	// Limit is the most streams returned; 0 means no limit.
	Limit int
}

// Streams lists the streams that have events, ordered by partition and tag
// (byte order), with each stream's recorded summary: version (its event
// count), head hash, first and last positions and the RecordedAt of its
// first and newest events. It reads the streams table through its primary
// key (plus two primary-key lookups of events per stream returned), so a
// page costs what it returns plus the streams it skips for TagPrefix; it
// never scans events. To page, pass the last stream returned as After.
func (a *Admin) Streams(ctx context.Context, q StreamsQuery) ([]journal.TagSummary, error) {
	if q.Limit < 0 {
		return nil, fmt.Errorf("%w: Streams: the limit is %d; give 0 for no limit or a positive number", journal.ErrInvalidQuery, q.Limit)
	}
	limit := any(nil)
	if q.Limit > 0 {
		limit = q.Limit
	}
	rows, err := a.pool.Query(ctx, a.sql(`SELECT s.partition, s.tag, `+pgschema.SummaryCols+`
		FROM __S__.streams s
		WHERE s.version > 0
		  AND ($1 = '' OR s.partition = $1)
		  AND ($2 = '' OR (s.tag >= $2 AND starts_with(s.tag, $2)))
		  AND (s.partition, s.tag) > ($3, $4)
		ORDER BY s.partition, s.tag
		LIMIT $5`), q.Partition, q.TagPrefix, q.After.Partition, string(q.After.Tag), limit)
	if err != nil {
		return nil, a.translate("list streams", err)
	}
	defer rows.Close()
	var out []journal.TagSummary
	for rows.Next() {
		var (
			s   journal.TagSummary
			tag string
			sr  pgschema.SummaryRow
		)
		if err := rows.Scan(append([]any{&s.Stream.Partition, &tag}, sr.Dest()...)...); err != nil {
			return nil, a.translate("list streams", err)
		}
		s.Stream.Tag = journal.Tag(tag)
		sr.Fill(&s)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, a.translate("list streams", err)
	}
	return out, nil
}

// LeaseInfo is a stream's lease as its streams row records it.
type LeaseInfo struct {
	Stream      journal.StreamID
	NodeID      string
	Incarnation uint64
	// Epoch is the lease's fencing token.
	Epoch uint64
	// Since is when the lease was granted (database clock); zero for a lease
	// granted before migration 0004 recorded grant times.
	Since time.Time
	// Until is when the holder's node session expires unless renewed
	// (database clock); zero when the node has no session row.
	Until time.Time
	// Live reports that the holder's node session is the lease's incarnation,
	// not closed and not expired by the database clock: the lease fences
	// other writers. A lease that is not live is free for the next Acquire.
	Live bool
}

// Leases lists the streams whose lease is held (granted and not released),
// ordered by partition and tag, with the holder's node session expiry by the
// database clock. partition "" lists every partition. It reads the streams
// table (every row of the selected partitions) and the nodes table.
func (a *Admin) Leases(ctx context.Context, partition string) ([]LeaseInfo, error) {
	rows, err := a.pool.Query(ctx, a.sql(`SELECT s.partition, s.tag, s.lease_node, s.lease_incarnation, s.epoch, s.leased_at, n.expires_at,
		coalesce(n.incarnation = s.lease_incarnation AND NOT n.closed AND n.expires_at > clock_timestamp(), false)
		FROM __S__.streams s LEFT JOIN __S__.nodes n ON n.node_id = s.lease_node
		WHERE s.lease_node IS NOT NULL AND NOT s.released AND ($1 = '' OR s.partition = $1)
		ORDER BY s.partition, s.tag`), partition)
	if err != nil {
		return nil, a.translate("list leases", err)
	}
	defer rows.Close()
	var out []LeaseInfo
	for rows.Next() {
		var (
			l          LeaseInfo
			tag        string
			inc, epoch int64
			since, exp *time.Time
		)
		if err := rows.Scan(&l.Stream.Partition, &tag, &l.NodeID, &inc, &epoch, &since, &exp, &l.Live); err != nil {
			return nil, a.translate("list leases", err)
		}
		l.Stream.Tag, l.Incarnation, l.Epoch = journal.Tag(tag), uint64(inc), uint64(epoch)
		if since != nil {
			l.Since = since.UTC()
		}
		if exp != nil {
			l.Until = exp.UTC()
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, a.translate("list leases", err)
	}
	return out, nil
}

// NodeInfo is a node session as the nodes table records it.
type NodeInfo struct {
	NodeID      string
	Incarnation uint64
	Timeout     time.Duration
	// OpenedAt is when this incarnation opened its session (database clock);
	// zero for a session opened before migration 0004 recorded it.
	OpenedAt  time.Time
	ExpiresAt time.Time
	Closed    bool
	// Live reports that the session is neither closed nor expired by the
	// database clock.
	Live bool
	// Leases counts the held (unreleased) stream leases of this incarnation.
	Leases uint64
}

// Nodes lists the node sessions, ordered by node ID, with the number of
// stream leases each current incarnation holds. It reads the nodes table and
// the streams table (every row).
func (a *Admin) Nodes(ctx context.Context) ([]NodeInfo, error) {
	rows, err := a.pool.Query(ctx, a.sql(`SELECT n.node_id, n.incarnation, n.timeout_us, n.opened_at, n.expires_at, n.closed,
		NOT n.closed AND n.expires_at > clock_timestamp(),
		(SELECT count(*) FROM __S__.streams s WHERE s.lease_node = n.node_id AND s.lease_incarnation = n.incarnation AND NOT s.released)
		FROM __S__.nodes n ORDER BY n.node_id`))
	if err != nil {
		return nil, a.translate("list nodes", err)
	}
	defer rows.Close()
	var out []NodeInfo
	for rows.Next() {
		var (
			n              NodeInfo
			inc, us, count int64
			opened         *time.Time
		)
		if err := rows.Scan(&n.NodeID, &inc, &us, &opened, &n.ExpiresAt, &n.Closed, &n.Live, &count); err != nil {
			return nil, a.translate("list nodes", err)
		}
		n.Incarnation, n.Timeout, n.Leases = uint64(inc), time.Duration(us)*time.Microsecond, uint64(count)
		n.ExpiresAt = n.ExpiresAt.UTC()
		if opened != nil {
			n.OpenedAt = opened.UTC()
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, a.translate("list nodes", err)
	}
	return out, nil
}

// UnchainedEvents counts the events of partition ("" for every partition)
// that are linked into no hash chain (no chain tags stored). The journal
// links every event, an untagged one into its type's untagged chain
// (journal.UntaggedChain), so each such event was inserted around the journal
// or written by a Scribe version that stored untagged events unchained. It
// scans the partition's events.
func (a *Admin) UnchainedEvents(ctx context.Context, partition string) (uint64, error) {
	var n int64
	err := a.pool.QueryRow(ctx, a.sql(`SELECT count(*) FROM __S__.events WHERE cardinality(tags) = 0 AND ($1 = '' OR partition = $1)`), partition).Scan(&n)
	if err != nil {
		return 0, a.translate("count unchained events", err)
	}
	return uint64(n), nil
}

// UnrecordedStreams lists the streams of partition ("" for every partition)
// that have events in the tag index but no streams row with a version: their
// recorded version and head hash were removed around the journal (the
// journal writes both in one statement). journal.VerifyStream reports such a
// stream as broken. Ordered by partition and tag; it reads the whole tag
// index of the selected partitions, as a verification does anyway.
func (a *Admin) UnrecordedStreams(ctx context.Context, partition string) ([]journal.StreamID, error) {
	rows, err := a.pool.Query(ctx, a.sql(`SELECT DISTINCT et.partition, et.tag FROM __S__.event_tags et
		WHERE ($1 = '' OR et.partition = $1)
		  AND NOT EXISTS (SELECT 1 FROM __S__.streams s WHERE s.partition = et.partition AND s.tag = et.tag AND s.version > 0)
		ORDER BY et.partition, et.tag`), partition)
	if err != nil {
		return nil, a.translate("list unrecorded streams", err)
	}
	defer rows.Close()
	var out []journal.StreamID
	for rows.Next() {
		var id journal.StreamID
		var tag string
		if err := rows.Scan(&id.Partition, &tag); err != nil {
			return nil, a.translate("list unrecorded streams", err)
		}
		id.Tag = journal.Tag(tag)
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, a.translate("list unrecorded streams", err)
	}
	return out, nil
}

// listStreamsPage is how many streams ListStreams reads per query.
const listStreamsPage = 1000

// ListStreams yields every stream of partition ("": every partition) that
// has events, archived whole ones included, ordered by partition then tag
// (byte order), reading Streams page by page: it implements
// evidence.StreamLister.
func (a *Admin) ListStreams(ctx context.Context, partition string) iter.Seq2[journal.StreamID, error] {
	return func(yield func(journal.StreamID, error) bool) {
		q := StreamsQuery{Partition: partition, Limit: listStreamsPage}
		for {
			page, err := a.Streams(ctx, q)
			if err != nil {
				yield(journal.StreamID{}, err)
				return
			}
			for _, st := range page {
				if !yield(st.Stream, nil) {
					return
				}
			}
			if len(page) < q.Limit {
				return
			}
			q.After = page[len(page)-1].Stream
		}
	}
}
