// Package snapshots defines the snapshot Store contract, the snapshot Policy
// that decides when a stream actor saves one, and an in-memory Store.
//
// A snapshot is a stream's state serialized at a version, stamped with the
// state's schema version. Loading picks the newest snapshot at or below a
// version; a caller whose state schema changed ignores snapshots of another
// schema version and replays the stream instead (never a wrong state).
package snapshots
