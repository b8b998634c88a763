package pgadmin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/scribe-es/scribe/journal"
)

// Retention: policies retire a stream's oldest events into the archive tables
// (events_archive, event_tags_archive) and move the stream's cut (its
// checkpoint: version, chain hash and position of the newest retired event).
//
// Each stream's cut is its own. An event's tag index row (event_tags) leaves
// with its stream's cut; the event's row (events) leaves only once every
// chain it is linked to has its cut at or past it, so a transfer tagged with
// two accounts stays hot, and readable through the other account's stream,
// until both accounts retired it.
//
// An event row also stays hot while a projection (or publisher) whose
// checkpoint lives in this schema (ProjectionStore) has not passed it: the
// feed (ReadAll, Subscribe) reads the hot table only, so a lagging projection
// would otherwise skip it. Each Archive run ends with a sweep that moves the
// event rows every chain let go and the projections have passed since (one
// ordered scan of the hot events table). A sliced projection's checkpoints
// are its slices' (projection_slices), and it reads its slices through the
// tag index: a stream's tag index rows it has not passed stay hot too, and
// the stream's cut stops before them until a later run (archiver.go,
// liveCheckpointsSQL).
//
// Archive works in batches of at most ArchiveOptions.BatchSize tag index
// rows. Each batch is one transaction under the schema's archive lock: it
// copies the rows to the archive and deletes them from the hot tables (one
// statement each, so a row is in exactly one table at any time) and moves the
// cuts. A crash loses at most the batch in flight, which rolled back; a rerun
// plans again from the recorded cuts, so nothing is lost or archived twice.
//
// Retention is Postgres-only: the in-memory journal keeps everything and does
// not implement journal.ArchiveReader.

// RetentionRule says which of a tag group's events retire. Exactly one of
// KeepFor, KeepLast and BeforeSnapshot is set.
type RetentionRule struct {
	// KeepFor keeps each stream's events recorded within this long before
	// the policy's Now; the older prefix of the stream retires.
	KeepFor time.Duration
	// KeepLast keeps each stream's newest KeepLast events (at least 1).
	KeepLast uint64
	// BeforeSnapshot retires each stream's events up to its newest snapshot.
	BeforeSnapshot bool
	// NoSnapshotCheck drops the snapshot requirement, for groups that no
	// aggregate recovers from (DCB-only tags such as "transfer"). By default
	// a stream's cut may not pass its newest snapshot (see
	// journal.ErrSnapshotRequired); journal.UntaggedGroup never checks: no
	// aggregate recovers from the untagged chains.
	NoSnapshotCheck bool
}

// ParseRetentionRule parses "keep:N", "age:DURATION" (a Go duration such as
// 720h) or "snapshot", optionally followed by ",nosnapshot".
func ParseRetentionRule(s string) (RetentionRule, error) {
	var r RetentionRule
	body, opt, hasOpt := strings.Cut(s, ",")
	if hasOpt {
		if opt != "nosnapshot" {
			return r, fmt.Errorf("retention rule %q: unknown option %q; the only option is nosnapshot", s, opt)
		}
		r.NoSnapshotCheck = true
	}
	kind, arg, _ := strings.Cut(body, ":")
	switch kind {
	case "keep":
		n, err := strconv.ParseUint(arg, 10, 64)
		if err != nil || n == 0 {
			return r, fmt.Errorf("retention rule %q: keep:N needs a whole number of events ≥ 1 to keep per stream", s)
		}
		r.KeepLast = n
	case "age":
		d, err := time.ParseDuration(arg)
		if err != nil || d <= 0 {
			return r, fmt.Errorf("retention rule %q: age:DURATION needs a positive Go duration such as 720h", s)
		}
		r.KeepFor = d
	case "snapshot":
		if arg != "" {
			return r, fmt.Errorf("retention rule %q: snapshot takes no argument", s)
		}
		if r.NoSnapshotCheck {
			return r, fmt.Errorf("retention rule %q: snapshot,nosnapshot contradicts itself", s)
		}
		r.BeforeSnapshot = true
	default:
		return r, fmt.Errorf("retention rule %q: give keep:N, age:DURATION or snapshot (optionally with ,nosnapshot)", s)
	}
	return r, nil
}

// String renders the rule as ParseRetentionRule reads it.
func (r RetentionRule) String() string {
	var s string
	switch {
	case r.KeepLast > 0:
		s = "keep:" + strconv.FormatUint(r.KeepLast, 10)
	case r.KeepFor > 0:
		s = "age:" + r.KeepFor.String()
	case r.BeforeSnapshot:
		s = "snapshot"
	}
	if r.NoSnapshotCheck {
		s += ",nosnapshot"
	}
	return s
}

func (r RetentionRule) validate(group string) error {
	n := 0
	for _, set := range []bool{r.KeepFor > 0, r.KeepLast > 0, r.BeforeSnapshot} {
		if set {
			n++
		}
	}
	if n != 1 || r.KeepFor < 0 {
		return fmt.Errorf("postgres: retention rule for group %q: set exactly one of KeepFor (> 0), KeepLast and BeforeSnapshot", group)
	}
	if group == "" {
		return errors.New("postgres: retention policy: a rule has an empty group name; name the tag group (the text before a tag's first colon)")
	}
	return nil
}

// RetentionPolicy maps tag groups to rules. Streams of groups without a rule
// keep everything, except retired streams (tombstones), whose events all
// retire whatever the policy.
type RetentionPolicy struct {
	// Groups maps a tag group ("account", or journal.UntaggedGroup for the
	// untagged events' chains, one per partition and event type) to its rule.
	Groups map[string]RetentionRule
	// Partition limits the policy to one partition; "" means every partition.
	Partition string
	// Now is the time KeepFor counts back from; zero means the journal's
	// Config.Clock.
	Now time.Time
}

// StreamCut is what a policy does to one stream.
type StreamCut struct {
	Stream journal.StreamID
	// Rule is the group's rule as text; "retired" for a tombstoned stream.
	Rule string
	// Version is the stream's version, Cut its current cut and Target the
	// cut the policy asks for (Target > Cut).
	Version, Cut, Target uint64
	// Snapshot is the stream's newest snapshot version (0: none).
	Snapshot uint64
	// SnapshotRequired: the cut may not pass the stream's newest snapshot
	// (an aggregate group's rule without nosnapshot); checked again by each
	// batch, against the snapshots then stored.
	SnapshotRequired bool
	// Refused says why the policy may not move this stream's cut (a snapshot
	// is required at or after Target); empty when it may.
	Refused string
}

// Retire is how many of the stream's versions the cut moves over.
func (c StreamCut) Retire() uint64 { return c.Target - c.Cut }

// ArchivePlan lists the streams a policy would move the cut of, ordered by
// partition and tag.
type ArchivePlan struct {
	Streams []StreamCut
}

// Events is the number of stream versions the plan retires (an event with two
// tags counts twice), refused streams excluded.
func (p ArchivePlan) Events() uint64 {
	var n uint64
	for _, c := range p.Streams {
		if c.Refused == "" {
			n += c.Retire()
		}
	}
	return n
}

// Refused returns the streams the policy may not cut, or nil.
func (p ArchivePlan) Refused() []StreamCut {
	var out []StreamCut
	for _, c := range p.Streams {
		if c.Refused != "" {
			out = append(out, c)
		}
	}
	return out
}

// planSQL reads what a rule needs of each stream of a group: version, cut,
// tombstone, newest snapshot and, for an age rule ($4 not null), the oldest
// hot version recorded at or after $4 (NULL when none is).
const planSQL = `SELECT s.partition, s.tag, s.version, s.cut_version, s.retired,
	coalesce((SELECT max(sn.version) FROM __S__.snapshots sn WHERE sn.partition = s.partition AND sn.tag = s.tag), 0),
	CASE WHEN $4::timestamptz IS NULL THEN NULL ELSE
		(SELECT min(et.version) FROM __S__.event_tags et JOIN __S__.events e ON e.commit_xid = et.commit_xid AND e.seq = et.seq
		 WHERE et.partition = s.partition AND et.tag = s.tag AND e.recorded_at >= $4::timestamptz) END
FROM __S__.streams s
WHERE s.version > 0 AND ($1 = '' OR s.partition = $1)
  AND (($2 AND s.tag_group = $3) OR (NOT $2 AND s.retired AND s.cut_version < s.version))
ORDER BY s.partition, s.tag`

// PlanArchive returns what policy would retire now, without changing
// anything: for each stream whose cut would move, its version, cut, target
// and newest snapshot, and why the move is refused when it is. A retired
// stream's target is its version.
func (a *Admin) PlanArchive(ctx context.Context, policy RetentionPolicy) (ArchivePlan, error) {
	now := policy.Now
	if now.IsZero() {
		now = a.clock()
	}
	groups := make([]string, 0, len(policy.Groups))
	for g, r := range policy.Groups {
		if err := r.validate(g); err != nil {
			return ArchivePlan{}, err
		}
		groups = append(groups, g)
	}
	slices.Sort(groups)
	seen := map[journal.StreamID]bool{}
	var plan ArchivePlan
	scan := func(group string, rule *RetentionRule) error {
		var cutoff pgtype.Timestamptz
		if rule != nil && rule.KeepFor > 0 {
			cutoff = pgtype.Timestamptz{Time: now.Add(-rule.KeepFor), Valid: true}
		}
		rows, err := a.pool.Query(ctx, a.sql(planSQL), policy.Partition, rule != nil, group, cutoff)
		if err != nil {
			return a.translate("plan archive", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				c            StreamCut
				tag          string
				v, cut, snap int64
				retired      bool
				young        *int64
			)
			if err := rows.Scan(&c.Stream.Partition, &tag, &v, &cut, &retired, &snap, &young); err != nil {
				return a.translate("plan archive", err)
			}
			c.Stream.Tag = journal.Tag(tag)
			c.Version, c.Cut, c.Snapshot = uint64(v), uint64(cut), uint64(snap)
			switch {
			case retired:
				c.Rule, c.Target = "retired", c.Version
			case rule.KeepLast > 0:
				c.Target = c.Version - min(c.Version, rule.KeepLast)
			case rule.KeepFor > 0:
				c.Target = c.Version
				if young != nil {
					c.Target = uint64(*young) - 1
				}
			case rule.BeforeSnapshot:
				c.Target = min(c.Snapshot, c.Version)
			}
			if rule != nil && !retired {
				c.Rule = rule.String()
				c.SnapshotRequired = !rule.NoSnapshotCheck && group != journal.UntaggedGroup
				if c.SnapshotRequired && c.Target > c.Snapshot && c.Target > c.Cut {
					c.Refused = fmt.Sprintf("no snapshot at or after version %d (newest: %d); recovery would need archived events", c.Target, c.Snapshot)
				}
			}
			if c.Target <= c.Cut || seen[c.Stream] {
				continue
			}
			seen[c.Stream] = true
			plan.Streams = append(plan.Streams, c)
		}
		return rows.Err()
	}
	for _, g := range groups {
		r := policy.Groups[g]
		if err := scan(g, &r); err != nil {
			return ArchivePlan{}, err
		}
	}
	if err := scan("", nil); err != nil {
		return ArchivePlan{}, err
	}
	slices.SortFunc(plan.Streams, func(a, b StreamCut) int {
		if c := strings.Compare(a.Stream.Partition, b.Stream.Partition); c != 0 {
			return c
		}
		return strings.Compare(string(a.Stream.Tag), string(b.Stream.Tag))
	})
	return plan, nil
}

// SnapshotRequiredError details journal.ErrSnapshotRequired: the streams a
// policy may not cut as asked. Nothing was retired.
type SnapshotRequiredError struct {
	Streams []StreamCut
}

func (e *SnapshotRequiredError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "postgres: archive refused: %d aggregate stream(s) have no snapshot at or after the cut the policy asks for, so recovering them would need archived events: ", len(e.Streams))
	for i, c := range e.Streams {
		if i == 3 {
			fmt.Fprintf(&b, ", and %d more", len(e.Streams)-3)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (cut %d asked, newest snapshot %d)", c.Stream, c.Target, c.Snapshot)
	}
	b.WriteString("; snapshot those streams first, choose a rule that keeps more (or retire up to the snapshot: snapshot), or mark a group no aggregate recovers from with nosnapshot. Nothing was retired")
	return b.String()
}

// Is matches journal.ErrSnapshotRequired.
func (e *SnapshotRequiredError) Is(target error) bool { return target == journal.ErrSnapshotRequired }
