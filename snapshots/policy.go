package snapshots

// DefaultEvery is the number of events between snapshots in DefaultPolicy.
const DefaultEvery = 100

// Policy decides when a stream actor saves a snapshot. The zero Policy never
// snapshots; DefaultPolicy returns the recommended one. A Policy is a plain
// value and safe for concurrent use.
type Policy struct {
	// Every makes a snapshot due once at least Every events were appended
	// since the last snapshot. 0 disables count-based snapshots. Default
	// (DefaultPolicy): DefaultEvery (100).
	Every uint64
	// OnPassivation makes a snapshot due when the actor passivates and its
	// state moved past the last snapshot. Default (DefaultPolicy): true.
	OnPassivation bool
	// Keep, when at least 1, bounds each stream's snapshots: after the actor
	// saves one it prunes the stream to its newest Keep (Retention{Keep}),
	// so the snapshot it just saved is never removed. 0 keeps every
	// snapshot. Default (DefaultPolicy): 0.
	Keep int
}

// Retention returns the retention the policy applies after each save, and
// false when it keeps every snapshot (Keep < 1).
func (p Policy) Retention() (Retention, bool) {
	if p.Keep < 1 {
		return Retention{}, false
	}
	return Retention{Keep: p.Keep}, true
}

// DefaultPolicy returns the policy a runtime uses unless configured otherwise:
// a snapshot every DefaultEvery events and on passivation.
func DefaultPolicy() Policy {
	return Policy{Every: DefaultEvery, OnPassivation: true}
}

// Due reports whether a snapshot should be saved at version, given that the
// newest snapshot is at lastSnapshotVersion (0 when the stream has none): true
// when Every is non-zero and version is at least Every past lastSnapshotVersion.
// A version at or below lastSnapshotVersion is never due.
func (p Policy) Due(lastSnapshotVersion, version uint64) bool {
	if p.Every == 0 || version <= lastSnapshotVersion {
		return false
	}
	return version-lastSnapshotVersion >= p.Every
}

// DueOnPassivation reports whether a snapshot should be saved when the actor
// passivates at version: true when OnPassivation is set and version is newer
// than lastSnapshotVersion (0 when the stream has none).
func (p Policy) DueOnPassivation(lastSnapshotVersion, version uint64) bool {
	return p.OnPassivation && version > lastSnapshotVersion
}
