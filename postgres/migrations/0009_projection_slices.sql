-- scribe:compatible-from 4
-- (Additive: a function, an index and two tables that older builds neither
-- read nor write. The index is built inside the migration's transaction and
-- blocks appends while it is built; on a large journal create it first by
-- hand with CREATE INDEX CONCURRENTLY and the same definition (this file's
-- IF NOT EXISTS then leaves it alone).)

-- scribe_slice: the slice of a tag in [0, 1024) (journal.SliceSpace): the
-- first four bytes of the MD5 of the tag, big-endian, modulo 1024. Its Go
-- twin is journal.SliceOf; TestSliceOfAgreesWithSQL proves they agree.
CREATE FUNCTION __SCHEMA__.scribe_slice(tag text) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT (('x' || substr(md5(tag), 1, 8))::bit(32)::bigint % 1024)::integer $$;

-- The feed of a sliced projection's runner (journal.SliceSubscriber): the
-- tags of one group of a partition in position order; the slice is the last
-- key column, so the scan tests it on the index entries and fetches only the
-- runner's own events. An expression index: the append path is unchanged.
CREATE INDEX IF NOT EXISTS event_tags_group_slice ON __SCHEMA__.event_tags
    (partition, split_part(tag, ':', 1), commit_xid, seq, __SCHEMA__.scribe_slice(tag)) INCLUDE (type);

-- projection_slices: one row per slice of a sliced projection version: its
-- checkpoint and the lease of the runner that owns it (fenced like the
-- projections row of an unsliced projection), and the slicing it was
-- created with (a different slicing is a different version).
CREATE TABLE __SCHEMA__.projection_slices (
    name        text COLLATE "C" NOT NULL,
    version     integer NOT NULL,
    slice       integer NOT NULL,
    tag_group   text COLLATE "C" NOT NULL,
    partition   text COLLATE "C" NOT NULL,
    slice_count integer NOT NULL,
    commit_xid  bigint  NOT NULL DEFAULT 0,
    seq         bigint  NOT NULL DEFAULT 0,
    events      bigint  NOT NULL DEFAULT 0,
    owner       text    NOT NULL DEFAULT '',
    epoch       bigint  NOT NULL DEFAULT 0,
    lease_until timestamptz NOT NULL DEFAULT '-infinity',
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT projection_slices_pkey PRIMARY KEY (name, version, slice)
);

-- projection_runners: the live runners of a sliced projection version
-- (renewed like a lease); every runner derives its share of the slices from
-- this list.
CREATE TABLE __SCHEMA__.projection_runners (
    name        text COLLATE "C" NOT NULL,
    version     integer NOT NULL,
    owner       text    NOT NULL,
    lease_until timestamptz NOT NULL,
    CONSTRAINT projection_runners_pkey PRIMARY KEY (name, version, owner)
);
