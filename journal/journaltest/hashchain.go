package journaltest

import (
	"testing"

	"github.com/scribe-es/scribe/journal"
)

func hashChainCases() []testCase {
	return []testCase{
		{"LinksChainAcrossMultiTagEvents", testLinksChain},
	}
}

func testLinksChain(t *testing.T, h Harness) {
	ctx := testContext(t)
	j := h.Journal
	const a, b, c journal.Tag = "a:1", "b:1", "c:1"
	mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("E", a), newEvent("E", a, b))
	mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("E", b, c))
	mustAppend(t, ctx, j, journal.AppendOptions{}, newEvent("E", c, a, b), newEvent("E", a))
	for _, tag := range []journal.Tag{a, b, c} {
		requireChained(t, collect(t, j.ReadStream(ctx, journal.Stream(tag), 1, 0)), tag)
	}
}
