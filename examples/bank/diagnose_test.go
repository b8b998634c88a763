package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
)

// explainReadModel logs, for each account the read model showed differently
// from the account itself, the account stream's events (ReadStream: what the
// account folds) beside the events the read model's query yields that carry
// the account's tag (Read: what the projection folds), and the events in one
// but not the other. It tells a journal whose tag index and feed disagree
// from a projection that skipped or repeated an event.
func explainReadModel(t *testing.T, j journal.Journal, ids []string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		tag := bank.AccountTag(id)
		describe := func(r journal.Record) string {
			return fmt.Sprintf("%s v%d %s %s %s", r.Position, r.Version(tag), r.Type, r.ID, r.Data)
		}
		var stream, feed []string
		for r, err := range j.ReadStream(ctx, journal.Stream(tag), 1, 0) {
			if err != nil {
				t.Logf("account %s: ReadStream: %v", id, err)
				break
			}
			stream = append(stream, describe(r))
		}
		for r, err := range j.Read(ctx, readModelQuery, journal.ReadOptions{}) {
			if err != nil {
				t.Logf("account %s: Read: %v", id, err)
				break
			}
			if r.HasTag(tag) {
				feed = append(feed, describe(r))
			}
		}
		var onlyStream, onlyFeed []string
		for _, s := range stream {
			if !slices.Contains(feed, s) {
				onlyStream = append(onlyStream, s)
			}
		}
		for _, f := range feed {
			if !slices.Contains(stream, f) {
				onlyFeed = append(onlyFeed, f)
			}
		}
		t.Logf("account %s: %d stream events, %d feed events; only in the stream: %v; only in the feed: %v\nstream:\n%s",
			id, len(stream), len(feed), onlyStream, onlyFeed, strings.Join(stream, "\n"))
	}
}
