-- projections: one row per projection version: its checkpoint (the position
-- of the last applied record), the lease of the runner applying it (owner,
-- epoch, lease_until: fenced like stream leases) and its failure, if any.
-- A commit locks the row (FOR UPDATE), checks the epoch and expiry, runs the
-- handler and moves the checkpoint in one transaction.
CREATE TABLE __SCHEMA__.projections (
    name           text COLLATE "C" NOT NULL,
    version        integer NOT NULL,
    commit_xid     bigint  NOT NULL DEFAULT 0,
    seq            bigint  NOT NULL DEFAULT 0,
    events         bigint  NOT NULL DEFAULT 0,
    owner          text    NOT NULL DEFAULT '',
    epoch          bigint  NOT NULL DEFAULT 0,
    lease_until    timestamptz NOT NULL DEFAULT '-infinity',
    state          text    NOT NULL DEFAULT 'idle',
    error          text    NOT NULL DEFAULT '',
    failed_xid     bigint  NOT NULL DEFAULT 0,
    failed_seq     bigint  NOT NULL DEFAULT 0,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT projections_pkey PRIMARY KEY (name, version)
);

-- projection_active: the version of each projection that readers use (the
-- newest version that caught up).
CREATE TABLE __SCHEMA__.projection_active (
    name    text COLLATE "C" PRIMARY KEY,
    version integer NOT NULL,
    since   timestamptz NOT NULL DEFAULT now()
);

-- projection_dead_letters: records a publisher gave up on, written in the
-- transaction that moves its checkpoint past them.
CREATE TABLE __SCHEMA__.projection_dead_letters (
    name       text COLLATE "C" NOT NULL,
    version    integer NOT NULL,
    event_id   uuid    NOT NULL,
    commit_xid bigint  NOT NULL,
    seq        bigint  NOT NULL,
    error      text    NOT NULL,
    attempts   integer NOT NULL,
    at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT projection_dead_letters_pkey PRIMARY KEY (name, version, commit_xid, seq)
);
