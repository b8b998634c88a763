-- scribe:compatible-from 4
-- (Additive: two tables and an index that older builds neither read nor
-- write. The index is built inside the migration's transaction and holds
-- off appends while it is built; on a large journal create it first by
-- hand with CREATE INDEX CONCURRENTLY and the same definition: IF NOT
-- EXISTS then leaves it alone.)

-- event_schemas: the shape (a JSON Schema document) of each event type
-- version a build registered, recorded when its runtime starts. A type
-- version keeps its first schema: a build registering another shape under
-- the same type and version is refused (journal.ErrTypeConflict).
CREATE TABLE __SCHEMA__.event_schemas (
    type        text COLLATE "C" NOT NULL,
    version     integer NOT NULL CHECK (version >= 1),
    schema      jsonb NOT NULL CHECK (jsonb_typeof(schema) = 'object'),
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (type, version)
);

-- event_type_builds: one row per build (its digest): the type versions it
-- writes and those it can read, as [{"type": …, "version": …}, …].
CREATE TABLE __SCHEMA__.event_type_builds (
    build             text PRIMARY KEY,
    node              text NOT NULL,
    writes            jsonb NOT NULL,
    reads             jsonb NOT NULL,
    first_recorded_at timestamptz NOT NULL DEFAULT now(),
    last_recorded_at  timestamptz NOT NULL DEFAULT now()
);

-- The type versions of the stored events by a loose index scan (a runtime's
-- start checks that it reads every one), and their counts by an
-- index-only scan (`scribe types`).
CREATE INDEX IF NOT EXISTS events_type_version ON __SCHEMA__.events (type, schema_version);
