// Command partitionmove measures what a partition move costs the appends of
// the other partitions of its source database: the latency of appends to
// partition "other" while partition "big" (-events events) moves to another
// schema, against the same appends with no move running.
//
//	go run ./benchmarks/partitionmove -db 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	    -events 200000 -writers 8 -runs 3
//
// Each run makes a fresh source and target schema (on -db, or the target on
// -db2), fills "big" through the journal's Append (batches of -fill-batch
// events over -accounts account streams, so every chain verifies), then
// measures -writers goroutines appending one event each to their own stream
// of "other" (batching on, no lease): first for -baseline with no move, then
// from the start to the end of pgadmin.MovePartition of "big". The report
// is a markdown table per phase: appends, p50, p99, p99.9 and the slowest
// append, the medians over the runs, the move's durations (whole, fence to
// switch, the switch step) and the slowest append to "other" that
// overlapped the fence step and the switch step.
package main
