-- scribe:compatible-from 4
-- (Additive: a nullable column that older builds neither read nor write.)
-- projection_dead_letters.replay_requested_at: when an operator asked the
-- projection's running runner to replay the letter (`scribe projections
-- dead-letters replay`); NULL when no replay is pending. A replay that
-- succeeds deletes the row; one that fails clears the request and records
-- the new error.
ALTER TABLE __SCHEMA__.projection_dead_letters
    ADD COLUMN replay_requested_at timestamptz;
