-- An unsliced projection is one slice of the same mechanism as a sliced
-- one: its checkpoint and lease live in projection_slices, as slice 0 with
-- an empty tag_group and partition (and slice_count 1). This carries every
-- unsliced projection that has applied something over, with its checkpoint,
-- events and epoch (its lease is void: its runner claims again and goes on
-- after the checkpoint). A projection that applied nothing gets its slice
-- when a runner first joins it. The projections row keeps its own state,
-- pause, failure and read model; its checkpoint columns are no longer
-- written. No older build may run against it (they would read the old
-- checkpoint columns): no compatible-from marker.
INSERT INTO __SCHEMA__.projection_slices (name, version, slice, tag_group, partition, slice_count, commit_xid, seq, events, epoch, updated_at)
SELECT p.name, p.version, 0, '', '', 1, p.commit_xid, p.seq, p.events, p.epoch, p.updated_at
FROM __SCHEMA__.projections p
WHERE (p.events > 0 OR p.commit_xid > 0 OR p.seq > 0)
  AND NOT EXISTS (SELECT FROM __SCHEMA__.projection_slices s WHERE s.name = p.name AND s.version = p.version);
