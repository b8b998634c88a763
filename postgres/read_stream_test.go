package postgres_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// A stream read finds each of the stream's events once, in version order,
// across pages and from any version, whether the stream's tag leads the
// event (an aggregate's, read straight from events) or follows another tag
// (a DCB event's, read through event_tags), and whatever an older build left
// in event_tags.lead (NULL: migration 16).
func TestReadStreamLeadAndOtherTags(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := setup(t, func(c *postgres.Config) { c.PageSize = 2 }) // stream pages of 16
	want := map[journal.Tag][]uuid.UUID{}
	for i := range 70 {
		var tags []journal.Tag
		switch i % 4 {
		case 0, 1:
			tags = []journal.Tag{"acct:1"}
		case 2:
			tags = []journal.Tag{"acct:0", "acct:1"}
		case 3:
			tags = []journal.Tag{"acct:1", "acct:2"}
		}
		id := journal.NewEventID()
		_, err := f.journal.Append(ctx, []journal.Event{{ID: id, Type: "E", Tags: tags, Data: []byte(fmt.Sprintf(`{"i":%d}`, i))}}, journal.AppendOptions{})
		require.NoError(t, err)
		for _, tag := range tags {
			want[tag] = append(want[tag], id)
		}
	}
	var leads, rest int
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE lead), count(*) FILTER (WHERE NOT lead) FROM `+quote(f.cfg.Schema)+`.event_tags`).Scan(&leads, &rest))
	require.Equal(t, 70, leads, "an event's first tag is its lead")
	require.Equal(t, 34, rest, "one other tag on each of the 34 DCB events")

	check := func(label string) {
		t.Helper()
		for tag, ids := range want {
			for _, from := range []int{1, 2, 16, 17, len(ids)} {
				var got []uuid.UUID
				for r, err := range f.journal.ReadStream(ctx, journal.Stream(tag), uint64(from), 0) {
					require.NoError(t, err)
					require.Equal(t, uint64(from+len(got)), r.Version(tag), "%s: %s from %d", label, tag, from)
					got = append(got, r.ID)
				}
				require.Equal(t, ids[from-1:], got, "%s: %s from version %d", label, tag, from)
			}
			n := 0
			for _, err := range f.journal.ReadStream(ctx, journal.Stream(tag), 3, 5) {
				require.NoError(t, err)
				n++
			}
			require.Equal(t, 5, n, "%s: %s with a limit", label, tag)
		}
	}
	check("as written")
	// Rows an older build wrote have no lead: lead and other rows alike.
	_, err := f.pool.Exec(ctx, `UPDATE `+quote(f.cfg.Schema)+`.event_tags SET lead = NULL WHERE version % 3 = 0`)
	require.NoError(t, err)
	check("lead NULL on every third version")
}
