package main

import (
	"fmt"
	"time"

	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/projection"
)

// slicedStatus is what `projections status` shows of a sliced projection:
// its slicing and, per slice, owner, checkpoint, events and lag. slices is
// nil for a projection that is not sliced.
type slicedStatus struct {
	layout projection.Layout
	slices []projection.SliceStatus
	lags   []pgadmin.SliceLag
	lag    uint64
	// behind is the age of the oldest event a slice has not applied.
	behind time.Duration
}

// readSliced reads k's slices, if it is sliced.
func readSliced(e *env, st *postgres.ProjectionStore, a *pgadmin.Admin, k projection.Key) (slicedStatus, error) {
	sts, l, err := st.Slices(e.ctx, k)
	if err != nil || !l.Sliced() {
		return slicedStatus{}, err
	}
	lags, err := a.SliceLags(e.ctx, k, 0)
	if err != nil {
		return slicedStatus{}, err
	}
	total := pgadmin.TotalSliceLag(lags)
	out := slicedStatus{layout: l, slices: sts, lags: lags, lag: total.Events}
	if !total.Oldest.IsZero() {
		out.behind = max(0, time.Since(total.Oldest)).Round(time.Millisecond)
	}
	return out, nil
}

// json returns the slices as JSON values (nil when not sliced).
func (s slicedStatus) json() []map[string]any {
	if s.slices == nil {
		return nil
	}
	out := make([]map[string]any, len(s.slices))
	for i, x := range s.slices {
		out[i] = map[string]any{"slice": x.Slice, "owner": x.Owner, "epoch": x.Epoch, "checkpoint": x.Checkpoint,
			"events": x.Events, "lag": s.lags[i].Events, "lagSeconds": lagSeconds(s.lags[i]), "leaseUntil": jsonTime(x.LeaseUntil)}
	}
	return out
}

// print writes the slice table of k (nothing when not sliced).
func (s slicedStatus) print(e *env, k projection.Key) error {
	if s.slices == nil {
		return nil
	}
	owners := map[string]int{}
	if len(s.layout.Partitions) > 0 {
		// Across several databases: the slices are partition × tag slice.
		fmt.Fprintf(e.stdout, "\n%s: %s (%d partitions, %d slices)\n", k, s.layout.Kind(), len(s.layout.Partitions), len(s.slices))
	} else {
		fmt.Fprintf(e.stdout, "\n%s: sliced by tag group %q of partition %q into %d slices\n", k, s.layout.Group, s.layout.Partition, s.layout.Count)
	}
	t := newTable(e.stdout, "SLICE", "OWNER", "EPOCH", "CHECKPOINT", "EVENTS", "LAG", "LAG TIME", "LEASE UNTIL")
	for i, x := range s.slices {
		owner := x.Owner
		if owner == "" {
			owner = "-"
		} else {
			owners[x.Owner]++
		}
		t.row(x.Slice, owner, x.Epoch, x.Checkpoint, x.Events, s.lags[i].Events, time.Duration(lagSeconds(s.lags[i])*float64(time.Second)).Round(time.Millisecond), fmtTime(x.LeaseUntil))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%d runners own slices; LAG counts each slice's events after its checkpoint, LAG TIME is the age of the oldest of them\n", len(owners))
	return nil
}

// lagSeconds is the age of the oldest event l counts, in seconds (0: none).
func lagSeconds(l pgadmin.SliceLag) float64 {
	if l.Oldest.IsZero() {
		return 0
	}
	return max(0, time.Since(l.Oldest).Seconds())
}
