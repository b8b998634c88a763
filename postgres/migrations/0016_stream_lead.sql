-- scribe:compatible-from 15
-- (Additive: an older build writes its tag index rows with lead NULL, which
-- every stream read answers correctly, through the join, and reads no
-- column or index added here. The backfill rewrites every event_tags row
-- and the indexes are built inside the migration's transaction, holding off
-- appends meanwhile: on a large journal create the two indexes first by hand
-- with CREATE INDEX CONCURRENTLY and the same definitions, and expect the
-- UPDATE to take about as long as the table's first index build.)

-- A stream read without a join. An event's lead tag is its first chain tag
-- (events.tags[1]): for an aggregate's event, the stream it was appended
-- through. events_lead_stream finds an event's row by its lead stream and
-- version, so a stream read fetches each such event straight from events,
-- in version order, without probing events_pkey once per event.
-- event_tags.lead says whether a tag index row is its event's lead tag;
-- event_tags_rest indexes the rows that are not (true for a DCB event's
-- other tags; NULL where an older build wrote the row), which a stream read
-- joins to events as before. That read also requires e.tags[1] to differ
-- from the stream's tag, so no event is read twice whatever lead holds.
-- The archive tables have no lead column: stream reads never read them.
-- journal.VerifyStream still reads a stream through event_tags
-- (ReadStreamThroughIndex), so an index row re-pointed at another event
-- breaks the chain as before.
ALTER TABLE __SCHEMA__.event_tags ADD COLUMN IF NOT EXISTS lead boolean;
UPDATE __SCHEMA__.event_tags et SET lead = (e.tags[1] = et.tag)
    FROM __SCHEMA__.events e WHERE e.commit_xid = et.commit_xid AND e.seq = et.seq;
CREATE INDEX IF NOT EXISTS events_lead_stream ON __SCHEMA__.events (partition, (tags[1]), (versions[1]));
CREATE INDEX IF NOT EXISTS event_tags_rest ON __SCHEMA__.event_tags (partition, tag, version) WHERE lead IS NOT TRUE;
