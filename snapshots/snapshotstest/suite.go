package snapshotstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/snapshots"
)

// Harness is what the suite needs from an implementation: a Store that is
// empty when handed over and used by one subtest only.
type Harness struct {
	Store snapshots.Store
}

// Run runs every conformance test as a parallel subtest of t. newHarness is
// called once per subtest, possibly from several goroutines at once, and must
// return a fresh, empty store; it releases that store's resources with
// t.Cleanup.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s snapshots.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"CreatedAtKeptToMicrosecond", testCreatedAtPrecision},
		{"CreatedAtDefaultsToNow", testCreatedAtDefault},
		{"StateIsCopied", testStateIsCopied},
		{"LoadAtOrBelow", testLoadAtOrBelow},
		{"LoadNewest", testLoadNewest},
		{"LoadUnknownStream", testLoadUnknownStream},
		{"ReplaceSameVersion", testReplaceSameVersion},
		{"List", testList},
		{"Prune", testPrune},
		{"PruneEdgeCases", testPruneEdgeCases},
		{"StreamsIsolated", testStreamsIsolated},
		{"PartitionsIsolated", testPartitionsIsolated},
		{"InvalidInput", testInvalidInput},
		{"CanceledContext", testCanceledContext},
		{"Concurrent", testConcurrent},
		{"RetentionKeepsNewest", testRetentionKeepsNewest},
		{"RetentionWhileSaving", testRetentionWhileSaving},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			require.NotNil(t, h.Store, "newHarness returned a Harness without a Store")
			tc.fn(t, h.Store)
		})
	}
}

// when is a fixed creation time at microsecond precision.
var when = time.Date(2026, time.March, 14, 15, 9, 26, 535897000, time.UTC)

func snap(stream journal.StreamID, version uint64, state string) snapshots.Snapshot {
	return snapshots.Snapshot{
		Stream:        stream,
		Version:       version,
		SchemaVersion: 1,
		State:         []byte(state),
		CreatedAt:     when.Add(time.Duration(version) * time.Second),
	}
}

func save(t *testing.T, s snapshots.Store, sn snapshots.Snapshot) {
	t.Helper()
	require.NoError(t, s.Save(t.Context(), sn), "Save %s v%d", sn.Stream, sn.Version)
}

func load(t *testing.T, s snapshots.Store, stream journal.StreamID, atOrBelow uint64) snapshots.Snapshot {
	t.Helper()
	got, err := s.Load(t.Context(), stream, atOrBelow)
	require.NoError(t, err, "Load %s at or below %d", stream, atOrBelow)
	return got
}

func requireNotFound(t *testing.T, s snapshots.Store, stream journal.StreamID, atOrBelow uint64) {
	t.Helper()
	got, err := s.Load(t.Context(), stream, atOrBelow)
	require.ErrorIs(t, err, snapshots.ErrNotFound, "Load %s at or below %d returned version %d", stream, atOrBelow, got.Version)
}

func versions(t *testing.T, s snapshots.Store, stream journal.StreamID) []uint64 {
	t.Helper()
	infos, err := s.List(t.Context(), stream)
	require.NoError(t, err, "List %s", stream)
	vs := make([]uint64, 0, len(infos))
	for _, in := range infos {
		vs = append(vs, in.Version)
	}
	return vs
}

func requireSame(t *testing.T, want, got snapshots.Snapshot) {
	t.Helper()
	require.Equal(t, want.Stream.Normalize(), got.Stream.Normalize(), "stream")
	require.Equal(t, want.Version, got.Version, "version")
	require.Equal(t, want.SchemaVersion, got.SchemaVersion, "schema version")
	require.Equal(t, want.State, got.State, "state")
	require.True(t, want.CreatedAt.Equal(got.CreatedAt), "CreatedAt: saved %s, loaded %s", want.CreatedAt, got.CreatedAt)
}

func testRoundTrip(t *testing.T, s snapshots.Store) {
	stream := journal.Stream("account:round-trip")
	want := snapshots.Snapshot{
		Stream:        stream,
		Version:       42,
		SchemaVersion: 7,
		// Binary state: every byte value, including NUL and invalid UTF-8.
		State:     make([]byte, 256),
		CreatedAt: when,
	}
	for i := range want.State {
		want.State[i] = byte(i)
	}
	save(t, s, want)

	got := load(t, s, stream, 42)
	requireSame(t, want, got)
	require.Equal(t, journal.DefaultPartition, got.Stream.Partition, "Load returns the stream's partition")

	// A stream saved with an empty partition is the default partition's stream.
	implicit := journal.StreamID{Tag: "account:implicit-partition"}
	save(t, s, snap(implicit, 3, "implicit"))
	got = load(t, s, journal.Stream("account:implicit-partition"), math.MaxUint64)
	require.Equal(t, []byte("implicit"), got.State)
	require.Equal(t, journal.Stream("account:implicit-partition"), got.Stream)
	require.Equal(t, []uint64{3}, versions(t, s, journal.Stream("account:implicit-partition")))
}

func testCreatedAtPrecision(t *testing.T, s snapshots.Store) {
	stream := journal.Stream("account:created-at")
	// Microsecond precision survives exactly, in any time zone.
	zone := time.FixedZone("UTC+05:30", 5*3600+1800)
	exact := snap(stream, 1, "exact")
	exact.CreatedAt = time.Date(2031, time.December, 31, 23, 59, 59, 999999000, zone)
	save(t, s, exact)
	got := load(t, s, stream, 1)
	require.True(t, exact.CreatedAt.Equal(got.CreatedAt), "saved %s, loaded %s", exact.CreatedAt, got.CreatedAt)

	// Finer precision is kept to the microsecond.
	fine := snap(stream, 2, "fine")
	fine.CreatedAt = time.Date(2026, time.June, 1, 12, 0, 0, 123456789, time.UTC)
	save(t, s, fine)
	got = load(t, s, stream, 2)
	require.WithinDuration(t, fine.CreatedAt, got.CreatedAt, time.Microsecond)

	// A time carrying a monotonic clock reading round-trips too.
	now := snap(stream, 3, "now")
	now.CreatedAt = time.Now()
	save(t, s, now)
	got = load(t, s, stream, 3)
	require.WithinDuration(t, now.CreatedAt, got.CreatedAt, time.Microsecond)

	infos, err := s.List(t.Context(), stream)
	require.NoError(t, err)
	require.Len(t, infos, 3)
	require.True(t, exact.CreatedAt.Equal(infos[0].CreatedAt), "List CreatedAt: saved %s, listed %s", exact.CreatedAt, infos[0].CreatedAt)
	require.WithinDuration(t, fine.CreatedAt, infos[1].CreatedAt, time.Microsecond)
}

func testCreatedAtDefault(t *testing.T, s snapshots.Store) {
	stream := journal.Stream("account:created-at-default")
	sn := snap(stream, 1, "state")
	sn.CreatedAt = time.Time{}
	before := time.Now()
	save(t, s, sn)
	after := time.Now()
	got := load(t, s, stream, 1)
	require.False(t, got.CreatedAt.IsZero(), "Save of a zero CreatedAt records the current time")
	// The store's clock (a database's) may differ slightly from this process's.
	require.WithinRange(t, got.CreatedAt, before.Add(-time.Minute), after.Add(time.Minute))
}

func testStateIsCopied(t *testing.T, s snapshots.Store) {
	stream := journal.Stream("account:copies")
	state := []byte("original")
	sn := snap(stream, 1, "")
	sn.State = state
	save(t, s, sn)
	copy(state, "MUTATED!")

	got := load(t, s, stream, 1)
	require.Equal(t, []byte("original"), got.State, "Save must not keep the caller's slice")

	// The caller owns what Load returns.
	copy(got.State, "changed!")
	again := load(t, s, stream, 1)
	require.Equal(t, []byte("original"), again.State, "Load must return bytes the caller owns")
}

func testLoadAtOrBelow(t *testing.T, s snapshots.Store) {
	stream := journal.Stream("account:at-or-below")
	// Saved out of order: the store orders by version, not by arrival.
	for _, v := range []uint64{20, 10, 40, 30} {
		save(t, s, snap(stream, v, fmt.Sprintf("state@%d", v)))
	}
	for _, c := range []struct{ atOrBelow, want uint64 }{
		{10, 10}, {11, 10}, {19, 10}, {20, 20}, {25, 20},
		{30, 30}, {39, 30}, {40, 40}, {41, 40}, {1 << 40, 40},
	} {
		got := load(t, s, stream, c.atOrBelow)
		require.Equal(t, c.want, got.Version, "newest at or below %d", c.atOrBelow)
		require.Equal(t, fmt.Sprintf("state@%d", c.want), string(got.State), "state of version %d", c.want)
		require.True(t, when.Add(time.Duration(c.want)*time.Second).Equal(got.CreatedAt), "CreatedAt of version %d", c.want)
	}
	requireNotFound(t, s, stream, 9)
	requireNotFound(t, s, stream, 1)
	requireNotFound(t, s, stream, 0)
}

func testLoadNewest(t *testing.T, s snapshots.Store) {
	stream := journal.Stream("account:newest")
	requireNotFound(t, s, stream, math.MaxUint64)
	for v := uint64(1); v <= 5; v++ {
		save(t, s, snap(stream, v*100, fmt.Sprintf("state@%d", v*100)))
		got := load(t, s, stream, math.MaxUint64)
		require.Equal(t, v*100, got.Version)
		require.Equal(t, fmt.Sprintf("state@%d", v*100), string(got.State))
	}
	// An older version saved later does not become the newest.
	save(t, s, snap(stream, 50, "late"))
	require.Equal(t, uint64(500), load(t, s, stream, math.MaxUint64).Version)
	require.Equal(t, "late", string(load(t, s, stream, 99).State))
}

func testLoadUnknownStream(t *testing.T, s snapshots.Store) {
	save(t, s, snap(journal.Stream("account:known"), 1, "x"))
	requireNotFound(t, s, journal.Stream("account:unknown"), math.MaxUint64)
	requireNotFound(t, s, journal.Stream("account:know"), math.MaxUint64)
	requireNotFound(t, s, journal.StreamID{Partition: "other", Tag: "account:known"}, math.MaxUint64)
	infos, err := s.List(t.Context(), journal.Stream("account:unknown"))
	require.NoError(t, err)
	require.Empty(t, infos)
}

func testReplaceSameVersion(t *testing.T, s snapshots.Store) {
	stream := journal.Stream("account:replace")
	save(t, s, snap(stream, 9, "state@9"))
	first := snapshots.Snapshot{Stream: stream, Version: 10, SchemaVersion: 1, State: []byte("first"), CreatedAt: when}
	second := snapshots.Snapshot{Stream: stream, Version: 10, SchemaVersion: 2, State: []byte("second, longer"), CreatedAt: when.Add(time.Hour)}
	save(t, s, first)
	save(t, s, second)

	requireSame(t, second, load(t, s, stream, 10))
	requireSame(t, second, load(t, s, stream, math.MaxUint64))
	require.Equal(t, "state@9", string(load(t, s, stream, 9).State), "replacing version 10 leaves version 9 alone")

	infos, err := s.List(t.Context(), stream)
	require.NoError(t, err)
	require.Len(t, infos, 2, "a replaced snapshot is listed once")
	require.Equal(t, snapshots.Info{Version: 10, SchemaVersion: 2, Size: len("second, longer")}, withoutTime(infos[1]))
	require.True(t, second.CreatedAt.Equal(infos[1].CreatedAt))
}

func withoutTime(in snapshots.Info) snapshots.Info {
	in.CreatedAt = time.Time{}
	return in
}

func testList(t *testing.T, s snapshots.Store) {
	stream := journal.Stream("account:list")
	infos, err := s.List(t.Context(), stream)
	require.NoError(t, err)
	require.Empty(t, infos, "a stream without snapshots lists none")

	saved := []snapshots.Snapshot{
		{Stream: stream, Version: 30, SchemaVersion: 3, State: bytes.Repeat([]byte{'c'}, 3000), CreatedAt: when.Add(3 * time.Minute)},
		{Stream: stream, Version: 1, SchemaVersion: 1, State: []byte("a"), CreatedAt: when.Add(1 * time.Minute)},
		{Stream: stream, Version: 7, SchemaVersion: -2, State: bytes.Repeat([]byte{0}, 70), CreatedAt: when.Add(2 * time.Minute)},
	}
	for _, sn := range saved {
		save(t, s, sn)
	}
	// Another stream's snapshots are not listed.
	save(t, s, snap(journal.Stream("account:list-other"), 5, "other"))

	infos, err = s.List(t.Context(), stream)
	require.NoError(t, err)
	want := []snapshots.Info{
		{Version: 1, SchemaVersion: 1, Size: 1},
		{Version: 7, SchemaVersion: -2, Size: 70},
		{Version: 30, SchemaVersion: 3, Size: 3000},
	}
	require.Len(t, infos, len(want))
	for i := range want {
		require.Equal(t, want[i], withoutTime(infos[i]), "entry %d", i)
		require.True(t, when.Add(time.Duration(i+1)*time.Minute).Equal(infos[i].CreatedAt), "entry %d CreatedAt %s", i, infos[i].CreatedAt)
	}
}

func testPrune(t *testing.T, s snapshots.Store) {
	stream := journal.Stream("account:prune")
	other := journal.Stream("account:prune-other")
	for v := uint64(1); v <= 6; v++ {
		save(t, s, snap(stream, v*10, fmt.Sprintf("state@%d", v*10)))
		save(t, s, snap(other, v, "other"))
	}

	n, err := s.Prune(t.Context(), stream, 2)
	require.NoError(t, err)
	require.Equal(t, 4, n, "Prune keeps the newest 2 of 6 and deletes 4")
	require.Equal(t, []uint64{50, 60}, versions(t, s, stream))
	requireNotFound(t, s, stream, 49)
	require.Equal(t, "state@50", string(load(t, s, stream, 59).State))
	require.Equal(t, uint64(60), load(t, s, stream, math.MaxUint64).Version)
	require.Equal(t, []uint64{1, 2, 3, 4, 5, 6}, versions(t, s, other), "Prune touches only its stream")

	n, err = s.Prune(t.Context(), stream, 2)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to prune")

	// Saving after a prune works as before.
	save(t, s, snap(stream, 70, "state@70"))
	n, err = s.Prune(t.Context(), stream, 1)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []uint64{70}, versions(t, s, stream))

	n, err = s.Prune(t.Context(), stream, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n, "keep 0 deletes every snapshot")
	require.Empty(t, versions(t, s, stream))
	requireNotFound(t, s, stream, math.MaxUint64)
	require.Len(t, versions(t, s, other), 6)
}

func testPruneEdgeCases(t *testing.T, s snapshots.Store) {
	stream := journal.Stream("account:prune-edges")
	n, err := s.Prune(t.Context(), stream, 0)
	require.NoError(t, err, "pruning a stream without snapshots is not an error")
	require.Zero(t, n)

	// Saved out of order: "newest" means highest version, not last saved.
	for _, v := range []uint64{3, 1, 2} {
		save(t, s, snap(stream, v, fmt.Sprint(v)))
	}
	n, err = s.Prune(t.Context(), stream, 10)
	require.NoError(t, err)
	require.Zero(t, n, "keep larger than the count deletes none")
	n, err = s.Prune(t.Context(), stream, 3)
	require.NoError(t, err)
	require.Zero(t, n, "keep equal to the count deletes none")
	require.Equal(t, []uint64{1, 2, 3}, versions(t, s, stream))

	n, err = s.Prune(t.Context(), stream, 1)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []uint64{3}, versions(t, s, stream))

	// The empty partition is the default partition for Prune too.
	n, err = s.Prune(t.Context(), journal.StreamID{Tag: stream.Tag}, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, versions(t, s, stream))
}

func testStreamsIsolated(t *testing.T, s snapshots.Store) {
	a := journal.Stream("account:1")
	b := journal.Stream("account:10")
	c := journal.Stream("order:1")
	save(t, s, snap(a, 5, "a@5"))
	save(t, s, snap(b, 3, "b@3"))
	save(t, s, snap(c, 8, "c@8"))

	require.Equal(t, "a@5", string(load(t, s, a, math.MaxUint64).State))
	require.Equal(t, "b@3", string(load(t, s, b, math.MaxUint64).State))
	require.Equal(t, "c@8", string(load(t, s, c, math.MaxUint64).State))
	requireNotFound(t, s, a, 4)
	requireNotFound(t, s, b, 2)
	require.Equal(t, []uint64{5}, versions(t, s, a))
	require.Equal(t, []uint64{3}, versions(t, s, b))

	n, err := s.Prune(t.Context(), a, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	requireNotFound(t, s, a, math.MaxUint64)
	require.Equal(t, "b@3", string(load(t, s, b, math.MaxUint64).State))
	require.Equal(t, "c@8", string(load(t, s, c, math.MaxUint64).State))
}

func testPartitionsIsolated(t *testing.T, s snapshots.Store) {
	tag := journal.Tag("account:42")
	def := journal.Stream(tag)
	implicit := journal.StreamID{Tag: tag}
	tenantA := journal.StreamID{Partition: "tenant-a", Tag: tag}
	tenantB := journal.StreamID{Partition: "tenant-b", Tag: tag}

	save(t, s, snap(def, 2, "default@2"))
	save(t, s, snap(tenantA, 2, "a@2"))
	save(t, s, snap(tenantA, 4, "a@4"))
	save(t, s, snap(tenantB, 1, "b@1"))

	require.Equal(t, "default@2", string(load(t, s, implicit, math.MaxUint64).State))
	got := load(t, s, tenantA, math.MaxUint64)
	require.Equal(t, "a@4", string(got.State))
	require.Equal(t, tenantA, got.Stream)
	require.Equal(t, "a@2", string(load(t, s, tenantA, 3).State))
	require.Equal(t, "b@1", string(load(t, s, tenantB, math.MaxUint64).State))
	requireNotFound(t, s, journal.StreamID{Partition: "tenant-c", Tag: tag}, math.MaxUint64)

	require.Equal(t, []uint64{2}, versions(t, s, implicit))
	require.Equal(t, []uint64{2, 4}, versions(t, s, tenantA))
	require.Equal(t, []uint64{1}, versions(t, s, tenantB))

	n, err := s.Prune(t.Context(), tenantA, 0)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []uint64{2}, versions(t, s, def))
	require.Equal(t, []uint64{1}, versions(t, s, tenantB))
}

func testInvalidInput(t *testing.T, s snapshots.Store) {
	ctx := t.Context()
	stream := journal.Stream("account:invalid")
	noTag := journal.StreamID{Partition: "tenant-a"}

	err := s.Save(ctx, snapshots.Snapshot{Stream: stream, Version: 0, State: []byte("x")})
	require.ErrorIs(t, err, snapshots.ErrInvalidArgument, "Save of version 0")
	require.Contains(t, err.Error(), "version", "the error names what was wrong")

	err = s.Save(ctx, snapshots.Snapshot{Stream: noTag, Version: 1, State: []byte("x")})
	require.ErrorIs(t, err, snapshots.ErrInvalidArgument, "Save with an empty tag")
	require.Contains(t, err.Error(), "tag", "the error names what was wrong")
	err = s.Save(ctx, snapshots.Snapshot{Version: 1, State: []byte("x")})
	require.ErrorIs(t, err, snapshots.ErrInvalidArgument, "Save of the zero stream")

	_, err = s.Load(ctx, noTag, math.MaxUint64)
	require.ErrorIs(t, err, snapshots.ErrInvalidArgument, "Load with an empty tag")
	_, err = s.List(ctx, noTag)
	require.ErrorIs(t, err, snapshots.ErrInvalidArgument, "List with an empty tag")
	_, err = s.Prune(ctx, noTag, 1)
	require.ErrorIs(t, err, snapshots.ErrInvalidArgument, "Prune with an empty tag")

	save(t, s, snap(stream, 1, "kept"))
	n, err := s.Prune(ctx, stream, -1)
	require.ErrorIs(t, err, snapshots.ErrInvalidArgument, "Prune with a negative keep")
	require.Contains(t, err.Error(), "keep", "the error names what was wrong")
	require.Zero(t, n)

	// Rejected calls changed nothing.
	require.Equal(t, []uint64{1}, versions(t, s, stream))
	requireNotFound(t, s, stream, 0)
}

func testCanceledContext(t *testing.T, s snapshots.Store) {
	stream := journal.Stream("account:canceled")
	save(t, s, snap(stream, 1, "state@1"))

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.Error(t, s.Save(ctx, snap(stream, 2, "state@2")), "Save with a canceled context")
	_, err := s.Load(ctx, stream, math.MaxUint64)
	require.Error(t, err, "Load with a canceled context")
	_, err = s.List(ctx, stream)
	require.Error(t, err, "List with a canceled context")
	_, err = s.Prune(ctx, stream, 0)
	require.Error(t, err, "Prune with a canceled context")

	require.Equal(t, []uint64{1}, versions(t, s, stream), "calls with a canceled context changed nothing")
}

// testConcurrent races writers and readers (run it with -race). Each writer
// owns a stream and also writes every version of a shared stream, where
// several writers replace the same versions; readers check that whatever they
// load is a whole snapshot, consistent with its version.
func testConcurrent(t *testing.T, s snapshots.Store) {
	const (
		writers   = 8
		readers   = 4
		perStream = 25
	)
	shared := journal.Stream("account:shared")
	own := func(w int) journal.StreamID {
		return journal.Stream(journal.NewTag("account", fmt.Sprintf("writer-%d", w)))
	}
	state := func(stream journal.StreamID, v uint64) []byte {
		// Big enough that a torn copy would show.
		return bytes.Repeat([]byte(fmt.Sprintf("%s@%d;", stream.Tag, v)), 64)
	}

	ctx := t.Context()
	errs := make(chan error, writers+readers)
	done := make(chan struct{})
	var writersWG, readersWG sync.WaitGroup
	for w := range writers {
		writersWG.Go(func() {
			for v := uint64(1); v <= perStream; v++ {
				for _, stream := range []journal.StreamID{own(w), shared} {
					sn := snapshots.Snapshot{Stream: stream, Version: v, SchemaVersion: 1, State: state(stream, v), CreatedAt: when}
					if err := s.Save(ctx, sn); err != nil {
						errs <- fmt.Errorf("writer %d: Save %s v%d: %w", w, stream, v, err)
						return
					}
				}
			}
		})
	}
	for r := range readers {
		readersWG.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for {
				select {
				case <-done:
					return
				default:
				}
				stream := shared
				if rng.IntN(2) == 0 {
					stream = own(rng.IntN(writers))
				}
				atOrBelow := uint64(rng.IntN(perStream + 2))
				got, err := s.Load(ctx, stream, atOrBelow)
				if errors.Is(err, snapshots.ErrNotFound) {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("reader %d: Load %s at or below %d: %w", r, stream, atOrBelow, err)
					return
				}
				if got.Version > atOrBelow || !bytes.Equal(got.State, state(stream, got.Version)) {
					errs <- fmt.Errorf("reader %d: Load %s at or below %d returned version %d with state %.40q…", r, stream, atOrBelow, got.Version, got.State)
					return
				}
				if _, err := s.List(ctx, stream); err != nil {
					errs <- fmt.Errorf("reader %d: List %s: %w", r, stream, err)
					return
				}
			}
		})
	}
	writersWG.Wait()
	close(done)
	readersWG.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	want := make([]uint64, perStream)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	for w := range writers {
		infos, err := s.List(ctx, own(w))
		require.NoError(t, err)
		require.Len(t, infos, perStream, "writer %d's stream", w)
		for i, in := range infos {
			require.Equal(t, want[i], in.Version)
			require.Equal(t, len(state(own(w), in.Version)), in.Size)
		}
	}
	infos, err := s.List(ctx, shared)
	require.NoError(t, err)
	require.Len(t, infos, perStream, "the shared stream holds each version once, however many writers saved it")
	got := load(t, s, shared, math.MaxUint64)
	require.Equal(t, uint64(perStream), got.Version)
	require.Equal(t, state(shared, perStream), got.State)
}

// lister returns s as a snapshots.Lister, skipping the test when it is not one.
func lister(t *testing.T, s snapshots.Store) snapshots.Lister {
	t.Helper()
	l, ok := s.(snapshots.Lister)
	if !ok {
		t.Skipf("%T does not implement snapshots.Lister: retention over a whole store skipped", s)
	}
	return l
}

func testRetentionKeepsNewest(t *testing.T, s snapshots.Store) {
	l := lister(t, s)
	ctx := t.Context()
	many := journal.Stream("account:many")
	one := journal.Stream("account:one")
	tenant := journal.StreamID{Partition: "tenant-r", Tag: "account:many"}
	for _, v := range []uint64{5, 1, 4, 2, 3} { // saved out of order
		save(t, s, snap(many, v, fmt.Sprint(v)))
		save(t, s, snap(tenant, v, fmt.Sprint(v)))
	}
	save(t, s, snap(one, 9, "9"))

	sums, err := l.Streams(ctx, "")
	require.NoError(t, err)
	require.Len(t, sums, 3)
	require.Equal(t, snapshots.StreamSummary{Stream: many, Count: 5, Oldest: 1, Newest: 5, NewestAt: when.Add(5 * time.Second), Size: 5}, sums[0])
	require.Equal(t, one, sums[1].Stream)
	require.Equal(t, tenant, sums[2].Stream, "ordered by partition, then tag")
	only, err := l.Streams(ctx, "tenant-r")
	require.NoError(t, err)
	require.Len(t, only, 1)

	for _, keep := range []int{0, -1} {
		_, err := snapshots.Retention{Keep: keep}.PruneAll(ctx, s, "")
		require.ErrorIs(t, err, snapshots.ErrInvalidArgument, "keep %d could delete a newest snapshot", keep)
		_, err = snapshots.Retention{Keep: keep}.Prune(ctx, s, many)
		require.ErrorIs(t, err, snapshots.ErrInvalidArgument)
	}
	require.Len(t, versions(t, s, many), 5, "a refused policy deletes nothing")

	res, err := snapshots.Retention{Keep: 2}.PruneAll(ctx, s, journal.DefaultPartition)
	require.NoError(t, err)
	require.Equal(t, snapshots.PruneResult{Streams: 1, Deleted: 3}, res)
	require.Equal(t, []uint64{4, 5}, versions(t, s, many))
	require.Equal(t, []uint64{9}, versions(t, s, one))
	require.Len(t, versions(t, s, tenant), 5, "another partition is untouched")

	res, err = snapshots.Retention{Keep: 1}.PruneAll(ctx, s, "")
	require.NoError(t, err)
	require.Equal(t, snapshots.PruneResult{Streams: 2, Deleted: 5}, res)
	for _, st := range []journal.StreamID{many, one, tenant} {
		sn, err := s.Load(ctx, st, math.MaxUint64)
		require.NoError(t, err, "stream %s keeps its newest snapshot", st)
		require.Equal(t, map[journal.StreamID]uint64{many: 5, one: 9, tenant: 5}[st], sn.Version)
	}
	n, err := snapshots.Retention{Keep: 1}.Prune(ctx, s, many)
	require.NoError(t, err)
	require.Zero(t, n, "the newest snapshot is never pruned")
}

func testRetentionWhileSaving(t *testing.T, s snapshots.Store) {
	lister(t, s)
	ctx := t.Context()
	stream := journal.Stream("account:busy")
	save(t, s, snap(stream, 1, "1"))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := uint64(2); v <= 40; v++ {
			if err := s.Save(ctx, snap(stream, v, fmt.Sprint(v))); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 20 {
		_, err := snapshots.Retention{Keep: 1}.PruneAll(ctx, s, "")
		require.NoError(t, err)
		sn, err := s.Load(ctx, stream, math.MaxUint64)
		require.NoError(t, err, "the stream always has a snapshot")
		require.NotZero(t, sn.Version)
	}
	wg.Wait()
	_, err := snapshots.Retention{Keep: 1}.PruneAll(ctx, s, "")
	require.NoError(t, err)
	require.Equal(t, []uint64{40}, versions(t, s, stream), "only the newest remains")
}
