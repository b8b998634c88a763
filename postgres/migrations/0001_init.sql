-- Scribe journal, sessions and snapshots. __SCHEMA__ is replaced by the
-- quoted schema name when the migration runs.

-- events: one row per event. Position = (commit_xid, seq): the appending
-- transaction's ID (pg_current_xact_id) and a global sequence (events_seq,
-- drawn by the append after it holds its locks). Links to the
-- event's tag streams are stored as parallel arrays (tags, versions) and
-- concatenated 32-byte hashes (prev_hashes, hashes), in tag order.
CREATE SEQUENCE __SCHEMA__.events_seq;
CREATE TABLE __SCHEMA__.events (
    commit_xid     bigint  NOT NULL,
    seq            bigint  NOT NULL DEFAULT nextval('__SCHEMA__.events_seq'),
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
    CONSTRAINT events_pkey PRIMARY KEY (commit_xid, seq),
    CONSTRAINT events_id_key UNIQUE (id)
);
-- Query.All within a partition, and type-only DCB items.
CREATE INDEX events_partition_pos ON __SCHEMA__.events (partition, commit_xid, seq);
CREATE INDEX events_partition_type_pos ON __SCHEMA__.events (partition, type, commit_xid, seq);
-- ReadByTypes and TypeSummaries.
CREATE INDEX events_type_recorded ON __SCHEMA__.events (type, recorded_at);
-- ReadByCorrelation.
CREATE INDEX events_correlation ON __SCHEMA__.events (correlation_id, commit_xid, seq)
    WHERE correlation_id IS NOT NULL;

-- event_tags: the tag index. (partition, tag, version) is unique: the last line
-- of defence against a second writer of a stream.
CREATE TABLE __SCHEMA__.event_tags (
    partition  text COLLATE "C"   NOT NULL,
    tag        text COLLATE "C"   NOT NULL,
    version    bigint NOT NULL,
    commit_xid bigint NOT NULL,
    seq        bigint NOT NULL,
    type       text COLLATE "C"   NOT NULL,
    CONSTRAINT event_tags_pkey PRIMARY KEY (partition, tag, version)
);
-- DCB reads by tag after a position (type filter answered from the index).
CREATE INDEX event_tags_pos ON __SCHEMA__.event_tags (partition, tag, commit_xid, seq) INCLUDE (type);

-- streams: one row per tag stream: version, hash chain head, first and last
-- positions, and the lease (holder node incarnation, epoch = fencing token).
CREATE TABLE __SCHEMA__.streams (
    partition         text COLLATE "C"    NOT NULL,
    tag               text COLLATE "C"    NOT NULL,
    tag_group         text COLLATE "C"    NOT NULL GENERATED ALWAYS AS (split_part(tag, ':', 1)) STORED,
    version           bigint  NOT NULL DEFAULT 0,
    head_hash         bytea,
    first_commit      bigint,
    first_seq         bigint,
    last_commit       bigint,
    last_seq          bigint,
    lease_node        text,
    lease_incarnation bigint,
    epoch             bigint  NOT NULL DEFAULT 0,
    released          boolean NOT NULL DEFAULT false,
    CONSTRAINT streams_pkey PRIMARY KEY (partition, tag)
) WITH (fillfactor = 80);
CREATE INDEX streams_group ON __SCHEMA__.streams (partition, tag_group, tag);

-- nodes: one session per node ID; a new incarnation supersedes the old one.
CREATE TABLE __SCHEMA__.nodes (
    node_id     text COLLATE "C"        PRIMARY KEY,
    incarnation bigint      NOT NULL,
    timeout_us  bigint      NOT NULL,
    expires_at  timestamptz NOT NULL,
    closed      boolean     NOT NULL DEFAULT false
) WITH (fillfactor = 70);

-- snapshots: per stream and version.
CREATE TABLE __SCHEMA__.snapshots (
    partition      text COLLATE "C"        NOT NULL,
    tag            text COLLATE "C"        NOT NULL,
    version        bigint      NOT NULL,
    schema_version integer     NOT NULL,
    state          bytea       NOT NULL,
    created_at     timestamptz NOT NULL,
    CONSTRAINT snapshots_pkey PRIMARY KEY (partition, tag, version)
);

-- fence_check aborts an append's write statement when its claim did not
-- update every stream it checked (a lease or version changed in between).
CREATE FUNCTION __SCHEMA__.fence_check(ok boolean) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF NOT ok THEN
        RAISE EXCEPTION 'scribe: a stream''s lease or version changed between the append''s checks and its claim'
            USING ERRCODE = 'SF001';
    END IF;
    RETURN true;
END
$$;
