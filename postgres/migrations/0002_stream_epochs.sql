-- stream_epochs: the epoch of a stream row created by Acquire. Release
-- deletes the row of a stream that has no events (a command for an account
-- that does not exist leaves nothing behind); when such a stream is leased
-- again its new row must not reuse an epoch an old lease of it still carries.
-- Every Acquire takes its epoch from this sequence (a new row and an updated
-- one alike), so epochs only grow per stream, also across a deleted row, and
-- a row created by an unleased append (epoch 0) gets a fresh one too.
CREATE SEQUENCE __SCHEMA__.stream_epochs;
SELECT setval('__SCHEMA__.stream_epochs', (SELECT coalesce(max(epoch), 0) + 1 FROM __SCHEMA__.streams));
