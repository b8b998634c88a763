// Command slices measures the catch-up of a sliced projection
// (projection.Slicing) on Postgres with 1, 2 and 4 runners side by side in
// one run, each runner with its own connection pool, over one journal
// filled once.
//
//	go run ./benchmarks/slices -db 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	    -events 200000 -runners 1,2,4 -rounds 2 -batch 64 -sleep 1ms
//
// The journal holds -events deposits spread over -accounts account streams
// (one account tag each), written straight into the events and event_tags
// tables (a bulk fill; the runners read them as the journal's readers do).
// Each measurement is a new projection version sliced by "account" into
// -slices slices, started with N runners at once; it ends when the slices'
// checkpoints hold every event. The handler spends -sleep per batch outside
// the database (a sleep standing for a remote call) and upserts per-account
// counts in the read model, in the checkpoint's transaction. Rounds
// alternate the runner counts so each sees the same machine. The report is
// a markdown table of events per second per runner count and the speedup
// over one runner.
package main
