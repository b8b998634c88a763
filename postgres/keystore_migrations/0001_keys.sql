-- The key store of package erasure: one data key per data subject, kept in a
-- schema of its own (never the journal's), so that a dump of the journal
-- schema holds no key.

-- subjects: a row per subject. data_key is NULL once the subject is erased
-- (erased_at and erased_by record the erasure: the audit entry, no personal
-- data) and for a subject erased before it had a key.
CREATE TABLE __SCHEMA__.subjects (
    subject    text PRIMARY KEY,
    data_key   bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    erased_at  timestamptz,
    erased_by  text,
    CONSTRAINT subjects_key_or_erased CHECK ((data_key IS NULL) = (erased_at IS NOT NULL)),
    CONSTRAINT subjects_key_size CHECK (data_key IS NULL OR octet_length(data_key) = 32)
);

-- subject_streams: the streams (partition + tag) holding events with a
-- subject's personal data, so an erasure knows which snapshots and actors
-- to drop.
CREATE TABLE __SCHEMA__.subject_streams (
    subject   text NOT NULL,
    partition text NOT NULL,
    tag       text NOT NULL,
    PRIMARY KEY (subject, partition, tag)
);

-- Whose keys seal a stream's snapshots.
CREATE INDEX subject_streams_stream ON __SCHEMA__.subject_streams (partition, tag);
