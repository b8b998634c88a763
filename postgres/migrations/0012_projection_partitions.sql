-- scribe:compatible-from 4
-- (Additive: two columns with defaults that older builds neither read nor
-- write. A sliced projection committed by an older build keeps its
-- member and event_id as they were; only projections across several
-- databases, which older builds cannot run, read them.)

-- A projection across several databases (projection.PartitionedSource) has
-- one projection_slices row per partition (tag_group ''; partition names
-- it). Its checkpoint (commit_xid, seq) is a position on the database named
-- member, and event_id is the event ID of the record there: a partition
-- move keeps event IDs but not positions, so a runner finds its place on
-- the partition's new database by event_id.
ALTER TABLE __SCHEMA__.projection_slices
    ADD COLUMN member   text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN event_id uuid;
