-- scribe:compatible-from 4
-- (Additive: a table, three defaulted columns and an index that older builds
-- neither read nor write; finished move records leave partition_moves for
-- partition_move_history. A build before this migration resumes a finished
-- move as if it were unfinished: move partitions only with a build that has
-- it. The index is built inside the migration's transaction and holds off
-- the archiver (not appends, which only read events_archive) while it is
-- built; on a large archive create it first by hand with CREATE INDEX
-- CONCURRENTLY and the same definition: IF NOT EXISTS then leaves it alone.)

-- partition_moves holds only unfinished moves from now on: at most one row
-- per partition, the move a run of MovePartition with the same source
-- resumes. A move's record leaves it for partition_move_history in the
-- transaction that finishes the move, so a finished move neither blocks nor
-- passes for a later move of the same partition in either direction.
--
-- synced_cuts, synced_archived, synced_retired: the source's sum of the
-- partition's stream cuts, count of its archived events and count of its
-- tombstoned streams when the move last copied the streams' heads, cuts and
-- tombstones. Each only grows on the source; the verify and switch steps
-- compare them with the source's current values and copy the streams again
-- when the archiver or RetireStream changed the partition since.
ALTER TABLE __SCHEMA__.partition_moves
    ADD COLUMN synced_cuts     bigint NOT NULL DEFAULT 0,
    ADD COLUMN synced_archived bigint NOT NULL DEFAULT 0,
    ADD COLUMN synced_retired  bigint NOT NULL DEFAULT 0;

-- partition_move_history: the finished moves into this database, one row
-- each, never read by a move.
CREATE TABLE __SCHEMA__.partition_move_history (
    move_id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    partition   text COLLATE "C" NOT NULL,
    source      text NOT NULL,
    events      bigint NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX partition_move_history_partition ON __SCHEMA__.partition_move_history (partition, finished_at);

INSERT INTO __SCHEMA__.partition_move_history (partition, source, events, started_at, finished_at)
    SELECT partition, source, copied, started_at, updated_at FROM __SCHEMA__.partition_moves WHERE state = 'done';
DELETE FROM __SCHEMA__.partition_moves WHERE state = 'done';

-- A partition's archived events in position order: a move copies them with
-- its hot events, and counts them.
CREATE INDEX IF NOT EXISTS events_archive_partition_pos ON __SCHEMA__.events_archive (partition, commit_xid, seq);
