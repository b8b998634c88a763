-- scribe:compatible-from 1
-- keyless says whether a subject's data key is gone (data_key IS NULL) in a
-- column of its own, so that a role granted every column but data_key (the
-- read-only role of postgres.RolesSQL) sees a subject's erasure state and
-- never a key.
ALTER TABLE __SCHEMA__.subjects
    ADD COLUMN keyless boolean GENERATED ALWAYS AS (data_key IS NULL) STORED;
