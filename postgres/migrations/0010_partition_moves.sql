-- scribe:compatible-from 4
-- (Additive: two new tables. Builds before it do not read them, so their
-- Acquire does not honour a partition's move fence: move partitions only
-- once every process runs a build with this migration.)
-- partition_fences: a partition being moved out of this database
-- ('outgoing': its streams' leases were revoked and Acquire refuses them),
-- moved out ('moved': nothing of it is left here; Acquire names moved_to),
-- or being moved in ('incoming': Acquire refuses it until the move ends).
CREATE TABLE __SCHEMA__.partition_fences (
    partition  text COLLATE "C" PRIMARY KEY,
    state      text NOT NULL CHECK (state IN ('outgoing', 'moved', 'incoming')),
    moved_to   text NOT NULL DEFAULT '',
    since      timestamptz NOT NULL DEFAULT now()
);

-- partition_moves: on the target of a move, its progress, committed with
-- each copied batch, so a move resumes after a crash where it stopped.
CREATE TABLE __SCHEMA__.partition_moves (
    partition   text COLLATE "C" PRIMARY KEY,
    source      text NOT NULL,
    state       text NOT NULL,
    last_commit bigint NOT NULL DEFAULT 0,
    last_seq    bigint NOT NULL DEFAULT 0,
    copied      bigint NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
