-- scribe:compatible-from 4
-- (Additive: a defaulted column. Builds before it do not read it, so their
-- runners do not honour a pause: pause projections once every process runs a
-- build with this migration.)
-- projections.paused: set by `scribe projections pause` (ProjectionStore.Pause);
-- Claim refuses a paused projection until Resume clears it.
ALTER TABLE __SCHEMA__.projections ADD COLUMN paused boolean NOT NULL DEFAULT false;
