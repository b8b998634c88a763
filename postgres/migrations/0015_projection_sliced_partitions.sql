-- A sliced projection across several databases (projection.Layout with
-- both Group and Partitions) has slice_count projection_slices rows per
-- partition (partition × tag slice): tag_group and slice_count are its
-- slicing's, partition names each row's partition, and by_partition marks
-- the rows of a layout by partition, which read their partition's feed
-- (its events table, in position order) with a checkpoint on the member
-- they name. Slice i is tag slice i % slice_count of its partition. The
-- rows of a projection across several databases without tag slicing
-- (tag_group '', partition set, migration 12) are by partition too. No
-- older build may run against it: an older archiver would take these rows
-- for a tag slicing of one database and let go of events their slices have
-- not passed (no compatible-from marker).
ALTER TABLE __SCHEMA__.projection_slices
    ADD COLUMN by_partition boolean NOT NULL DEFAULT false;
UPDATE __SCHEMA__.projection_slices SET by_partition = true WHERE tag_group = '' AND partition <> '';
