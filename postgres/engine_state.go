package postgres

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
)

const fastStateSQL = `SELECT s.partition, s.tag, s.version, s.head_hash, s.lease_node, s.lease_incarnation, s.epoch, s.released,
	s.last_commit, s.last_seq, s.retired
FROM unnest($1::text[], $2::text[]) AS k(partition, tag)
JOIN __S__.streams s ON s.partition = k.partition AND s.tag = k.tag`

const fastNodesSQL = `SELECT node_id, incarnation, closed, expires_at > clock_timestamp() FROM __S__.nodes WHERE node_id = ANY($1::text[])`

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

// uuidArray returns ids as a uuid[] argument pgx encodes in binary directly.
func uuidArray(ids []uuid.UUID) pgtype.FlatArray[pgtype.UUID] {
	out := make(pgtype.FlatArray[pgtype.UUID], len(ids))
	for i, id := range ids {
		out[i] = pgtype.UUID{Bytes: id, Valid: true}
	}
	return out
}
