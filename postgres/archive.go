package postgres

import (
	"context"
	"fmt"
	"iter"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/internal/pgschema"
)

// Reading around the archive. Retired events live in events_archive and
// event_tags_archive (migration 0005); each stream's cut is in its streams
// row. The hot read paths never look at the archive tables: ReadStream fails
// with a *journal.ArchivedError below a stream's cut, and Read, ReadAll,
// Subscribe and the summaries of types see hot events only.
// ReadStreamWithArchive (journal.ArchiveReader) is the one explicit way in.
// Event IDs are the exception: ReadEvent and the append's duplicate check
// look in both tables, since an archived event's ID stays taken.

var _ journal.ArchiveReader = (*Journal)(nil)

// cutSQL reads a stream's cut (streams primary key).
const cutSQL = `SELECT cut_version, cut_commit, cut_seq, retired FROM __S__.streams WHERE partition = $1 AND tag = $2`

// checkCut fails with a *journal.ArchivedError when version from of stream is
// at or below the stream's cut.
func (j *Journal) checkCut(ctx context.Context, stream journal.StreamID, from uint64) error {
	var cut int64
	var cc, cs *int64
	var retired bool
	err := j.pool.QueryRow(ctx, j.sql(cutSQL), stream.Partition, string(stream.Tag)).Scan(&cut, &cc, &cs, &retired)
	if err == pgx.ErrNoRows {
		return nil
	}
	if err != nil {
		return j.translate("read stream: read the stream's cut", err)
	}
	if from > uint64(cut) {
		return nil
	}
	e := &journal.ArchivedError{Stream: stream, CutVersion: uint64(cut), FromVersion: from, Retired: retired}
	if cc != nil && cs != nil {
		e.CutPosition = journal.Position{Commit: uint64(*cc), Seq: uint64(*cs)}
	}
	return e
}

// readStreamWithArchiveSQL reads a stream's versions from a version in both
// tag indexes, each event from whichever events table holds it. One
// statement sees one snapshot, and the archiver moves a row in one
// transaction, so each version is found exactly once.
const readStreamWithArchiveSQL = `SELECT ` + recordCols + ` FROM (
		(SELECT commit_xid, seq, version FROM __S__.event_tags_archive
			WHERE partition = $1 AND tag = $2 AND version >= $3 ORDER BY version LIMIT $4)
		UNION ALL
		(SELECT commit_xid, seq, version FROM __S__.event_tags
			WHERE partition = $1 AND tag = $2 AND version >= $3 ORDER BY version LIMIT $4)
	) et CROSS JOIN LATERAL (
		SELECT ` + pgschema.ArchiveCols + ` FROM __S__.events x WHERE x.commit_xid = et.commit_xid AND x.seq = et.seq
		UNION ALL
		SELECT ` + pgschema.ArchiveCols + ` FROM __S__.events_archive x WHERE x.commit_xid = et.commit_xid AND x.seq = et.seq
	) e
	ORDER BY et.version LIMIT $4`

// ReadStreamWithArchive implements journal.ArchiveReader: ReadStream
// through the cut, archived and hot alike, for audits and exports, in
// ReadStream's pages. Like ReadStream, a stream found empty whose partition
// moved away from this schema fails with journal.ErrPartitionMoved naming
// where it went.
func (j *Journal) ReadStreamWithArchive(ctx context.Context, stream journal.StreamID, fromVersion uint64, limit int) iter.Seq2[journal.Record, error] {
	stream = stream.Normalize()
	if stream.Tag == "" {
		return yieldErr(fmt.Errorf("%w: ReadStreamWithArchive: the stream's tag is empty; name the stream to read", journal.ErrInvalidQuery))
	}
	if limit < 0 {
		return yieldErr(fmt.Errorf("%w: ReadStreamWithArchive: limit %d is negative; use 0 for no limit", journal.ErrInvalidQuery, limit))
	}
	fromVersion = max(fromVersion, 1)
	stmt := j.sql(readStreamWithArchiveSQL)
	return j.pages(ctx, limit, streamPageFactor*j.cfg.PageSize, func(last *journal.Record, n int, buf []journal.Record) ([]journal.Record, error) {
		from := fromVersion
		if last != nil {
			from = last.Version(stream.Tag) + 1
		}
		page, err := queryRecordsInto(ctx, j.pool, j.cfg.Schema, buf, "read stream with archive", stmt, stream.Partition, string(stream.Tag), i64(from), n)
		if err == nil && len(page) == 0 && from == 1 {
			// An empty stream: or one whose partition moved away, which
			// the caller must learn rather than read it as empty.
			if err := j.movedAway(ctx, stream.Partition); err != nil {
				return nil, err
			}
		}
		return page, err
	})
}
