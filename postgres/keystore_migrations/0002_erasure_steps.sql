-- scribe:compatible-from 1
-- Erasure in steps: an erasure is begun (erased_at and erased_by set: the key
-- is refused from then on, as builds of version 1 refuse it too), then the key
-- is destroyed (data_key NULL), then it is complete (completed_at). Each
-- erasure begun gets erasure_seq from the one-row erasure_head, under that
-- row's lock, so sequence numbers become visible in their order and a follower
-- reading erasure_seq > its cursor misses none. A trigger assigns it, so an
-- erasure begun by a build of version 1 (one statement that also destroys the
-- key) gets one too, and stays pending until a sweep completes it.

ALTER TABLE __SCHEMA__.subjects
    DROP CONSTRAINT subjects_key_or_erased,
    ADD COLUMN erasure_seq bigint,
    ADD COLUMN completed_at timestamptz,
    ADD CONSTRAINT subjects_key_or_erasure CHECK (data_key IS NOT NULL OR erased_at IS NOT NULL),
    ADD CONSTRAINT subjects_complete_without_key CHECK (completed_at IS NULL OR (erased_at IS NOT NULL AND data_key IS NULL));

CREATE TABLE __SCHEMA__.erasure_head (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    seq bigint NOT NULL
);

-- Upgrade: subjects erased before this migration get sequence numbers in the
-- order of their erasure and stay pending (completed_at NULL): a build of
-- version 1 could have stopped between destroying the key and appending the
-- erasure record, so the first sweep completes each (a record already
-- appended is an idempotent duplicate; its snapshots are deleted).
UPDATE __SCHEMA__.subjects s SET erasure_seq = o.n
FROM (SELECT subject, row_number() OVER (ORDER BY erased_at, subject) AS n
      FROM __SCHEMA__.subjects WHERE erased_at IS NOT NULL) o
WHERE s.subject = o.subject;

INSERT INTO __SCHEMA__.erasure_head (seq)
SELECT coalesce(max(erasure_seq), 0) FROM __SCHEMA__.subjects;

ALTER TABLE __SCHEMA__.subjects
    ADD CONSTRAINT subjects_erasure_seq CHECK ((erased_at IS NULL) = (erasure_seq IS NULL));

CREATE FUNCTION __SCHEMA__.subjects_assign_erasure_seq() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.erased_at IS NOT NULL AND (TG_OP = 'INSERT' OR OLD.erased_at IS NULL) THEN
        UPDATE __SCHEMA__.erasure_head SET seq = seq + 1 RETURNING seq INTO NEW.erasure_seq;
    ELSIF TG_OP = 'UPDATE' THEN
        NEW.erasure_seq := OLD.erasure_seq;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER subjects_erasure_seq BEFORE INSERT OR UPDATE ON __SCHEMA__.subjects
    FOR EACH ROW EXECUTE FUNCTION __SCHEMA__.subjects_assign_erasure_seq();

-- The erasure feed, and the pending erasures a sweep completes.
CREATE UNIQUE INDEX subjects_erasures ON __SCHEMA__.subjects (erasure_seq) WHERE erasure_seq IS NOT NULL;
CREATE INDEX subjects_pending_erasures ON __SCHEMA__.subjects (erasure_seq) WHERE erasure_seq IS NOT NULL AND completed_at IS NULL;
