-- scribe:compatible-from 4
-- (Additive: builds of schema version 4 keep running against it during a
-- rolling upgrade, TestRollingUpgradeFromPreviousRelease in examples/bank;
-- use retention only once every process runs a build that knows it.)
-- Retention and archiving. Retired events move from the hot tables (events,
-- event_tags) to archive tables with the same columns; each stream records
-- its cut (checkpoint) and, when closed for good, a tombstone.
--
-- streams.cut_version: versions 1..cut_version of the stream are archived
-- (their event_tags rows are in event_tags_archive); cut_hash is the chain
-- hash of version cut_version and (cut_commit, cut_seq) its position. A
-- stream's cut only moves forward, and only the archiver moves it.
-- streams.retired: a tombstone; the append engine refuses every append that
-- names the stream, so its versions are never reused.
ALTER TABLE __SCHEMA__.streams
    ADD COLUMN cut_version bigint NOT NULL DEFAULT 0,
    ADD COLUMN cut_hash    bytea,
    ADD COLUMN cut_commit  bigint,
    ADD COLUMN cut_seq     bigint,
    ADD COLUMN retired     boolean NOT NULL DEFAULT false,
    ADD COLUMN retired_at  timestamptz;

-- events_archive: event rows that left the hot table. An event row moves
-- only once every chain it is linked to (each of its tags' streams) has its
-- cut at or past it. Same columns as events, plus when it was archived.
CREATE TABLE __SCHEMA__.events_archive (
    commit_xid     bigint  NOT NULL,
    seq            bigint  NOT NULL,
    id             uuid    NOT NULL,
    partition      text COLLATE "C"    NOT NULL,
    type           text COLLATE "C"    NOT NULL,
    schema_version integer NOT NULL,
    tags           text[]  NOT NULL,
    versions       bigint[] NOT NULL,
    prev_hashes    bytea   NOT NULL,
    hashes         bytea   NOT NULL,
    data           bytea   NOT NULL,
    metadata       bytea   NOT NULL,
    correlation_id text,
    recorded_at    timestamptz NOT NULL,
    archived_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT events_archive_pkey PRIMARY KEY (commit_xid, seq),
    CONSTRAINT events_archive_id_key UNIQUE (id)
);

-- event_tags_archive: the tag index rows of archived stream versions (a row
-- moves when its stream's cut passes it, whether or not its event row is
-- still hot for another tag).
CREATE TABLE __SCHEMA__.event_tags_archive (
    partition  text COLLATE "C"   NOT NULL,
    tag        text COLLATE "C"   NOT NULL,
    version    bigint NOT NULL,
    commit_xid bigint NOT NULL,
    seq        bigint NOT NULL,
    type       text COLLATE "C"   NOT NULL,
    CONSTRAINT event_tags_archive_pkey PRIMARY KEY (partition, tag, version)
);
