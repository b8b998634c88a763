-- scribe:compatible-from 4
-- (Additive: a new table and a defaulted column that older builds neither
-- read nor write.)
-- projection_rows: the rows read models of projections (projection.Rows):
-- JSON documents by collection and key, per projection version, written in
-- the transaction that moves the projection's checkpoint and deleted by the
-- reset that moves it back to zero.
CREATE TABLE __SCHEMA__.projection_rows (
    name       text COLLATE "C" NOT NULL,
    version    integer NOT NULL,
    collection text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    doc        jsonb   NOT NULL,
    CONSTRAINT projection_rows_pkey PRIMARY KEY (name, version, collection, key)
);

-- projections.read_model: the kind of read model the projection's runner
-- declared (projection.ReadModelKind): 'rows' when a reset alone empties
-- it, 'custom' when only the service's code can, '' before a runner of a
-- build that declares it started.
ALTER TABLE __SCHEMA__.projections
    ADD COLUMN read_model text NOT NULL DEFAULT '';
