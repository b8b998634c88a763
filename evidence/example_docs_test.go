package evidence_test

import (
	"context"
	"log/slog"
	"time"

	"github.com/scribe-es/scribe/evidence"
	"github.com/scribe-es/scribe/journal/memory"
)

// checkpointEvery is the evidence page's scheduled checkpoints, in a
// service's own process.
func checkpointEvery(ctx context.Context, j evidence.Source, logger *slog.Logger) {
	priv, _ := evidence.ReadPrivateKey("/secure/scribe-signing.key")
	go evidence.Schedule(ctx, j, priv, evidence.DirSink{Dir: "/evidence/checkpoints"}, evidence.ScheduleOptions{
		Every: 10 * time.Minute, // or Ticks: a channel of its own scheduler
		Done: func(r evidence.Scheduled) {
			if r.Err != nil {
				logger.Warn("checkpoint failed; trying again at the next interval", "error", r.Err)
			}
		},
	})
	// On demand: res := evidence.MakeSigned(ctx, j, priv, sink, evidence.MakeOptions{})
}

// Signed checkpoints on a schedule, each written to a directory. (It needs
// a signing key file, so it is compiled but not run by go test.)
func ExampleSchedule() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	checkpointEvery(ctx, memory.New(), slog.Default())
}
