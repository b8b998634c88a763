package snapshots_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/snapshots"
)

func Example() {
	ctx := context.Background()
	store := snapshots.NewMemory()
	stream := journal.Stream("account:42")
	policy := snapshots.DefaultPolicy()

	// A stream actor saves a snapshot whenever its policy says one is due.
	var last uint64
	for version := uint64(1); version <= 250; version++ {
		if !policy.Due(last, version) {
			continue
		}
		state := fmt.Sprintf(`{"balance":%d}`, version*10)
		err := store.Save(ctx, snapshots.Snapshot{
			Stream:        stream,
			Version:       version,
			SchemaVersion: 1,
			State:         []byte(state),
			CreatedAt:     time.Date(2026, 1, 1, 0, 0, int(version), 0, time.UTC),
		})
		if err != nil {
			fmt.Println("save:", err)
			return
		}
		last = version
	}

	// Recovery to version 150 starts from the newest snapshot at or below it
	// and replays the events after it.
	s, err := store.Load(ctx, stream, 150)
	if err != nil {
		fmt.Println("load:", err)
		return
	}
	fmt.Printf("recover to 150 from snapshot %d: %s, replay %d events\n", s.Version, s.State, 150-s.Version)

	newest, _ := store.Load(ctx, stream, math.MaxUint64)
	fmt.Printf("newest snapshot: %d\n", newest.Version)

	_, err = store.Load(ctx, stream, 99)
	fmt.Println("at or below 99 found:", !errors.Is(err, snapshots.ErrNotFound))

	infos, _ := store.List(ctx, stream)
	for _, in := range infos {
		fmt.Printf("version %d, schema %d, %d bytes\n", in.Version, in.SchemaVersion, in.Size)
	}

	deleted, _ := store.Prune(ctx, stream, 1)
	infos, _ = store.List(ctx, stream)
	fmt.Printf("pruned %d, kept version %d\n", deleted, infos[0].Version)

	// Output:
	// recover to 150 from snapshot 100: {"balance":1000}, replay 50 events
	// newest snapshot: 200
	// at or below 99 found: false
	// version 100, schema 1, 16 bytes
	// version 200, schema 1, 16 bytes
	// pruned 1, kept version 200
}
