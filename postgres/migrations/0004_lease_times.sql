-- Lease and node session start times, for operators (scribe leases): when a
-- stream's current lease was granted (leased_at, set by Acquire) and when a
-- node's current incarnation opened its session (opened_at, set by
-- OpenNode). Neither is read by the append path or the fence; rows written
-- before this migration have NULL until their next Acquire or OpenNode.
ALTER TABLE __SCHEMA__.streams ADD COLUMN leased_at timestamptz;
ALTER TABLE __SCHEMA__.nodes ADD COLUMN opened_at timestamptz;
