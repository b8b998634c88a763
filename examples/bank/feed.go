package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// GET /events/stream across several databases (-db2). Positions are ordered
// per database and a partition move gives a partition's events new
// positions (same event IDs), so the stream reads each partition on its
// own (partitioned.Router.FollowPartition: catch-up, then live, following
// moves by event ID) and merges them as they come: each partition's events
// in the partition's order, no order between partitions. An SSE id is a
// feedCursor: per partition, the ID of the last event delivered.

// partitionFeed is the feed of a journal spread over several databases:
// partitioned.Router with more than one member. Its methods may be called
// concurrently.
type partitionFeed interface {
	// FeedPartitions lists the partitions to read, sorted; nil when the
	// journal has a single database (its global feed is the journal's).
	FeedPartitions() []string
	// FollowPartition yields q's partition after the event afterID
	// (uuid.Nil: from the start), catch-up then live, following moves.
	FollowPartition(ctx context.Context, q journal.Query, member string, after journal.Position, afterID uuid.UUID, located func(member string, at journal.Position)) iter.Seq2[journal.Record, error]
	// ReadEvent finds an event by ID on any database.
	ReadEvent(ctx context.Context, id uuid.UUID) (journal.Record, error)
}

// partitionFeeder is the optional capability of a Service whose journal
// may span several databases.
type partitionFeeder interface {
	// partitionFeed returns the journal's partition feed, nil when the
	// journal has one database.
	partitionFeed() partitionFeed
}

// partitionFeed implements partitionFeeder: the router of -db2.
func (s *bankService) partitionFeed() partitionFeed {
	if pf, ok := s.journal.(partitionFeed); ok && len(pf.FeedPartitions()) > 0 {
		return pf
	}
	return nil
}

// partitionFeed returns the partition feed GET /events/stream follows, nil
// when the journal has one database (the stream follows readSide.Feed).
func (a *api) partitionFeed() partitionFeed {
	if f, ok := a.svc.(partitionFeeder); ok {
		return f.partitionFeed()
	}
	return nil
}

// maxCursorLength bounds a cursor given to GET /events/stream.
const maxCursorLength = 4096

// feedCursor is a place in the partition feed: per partition, the ID of
// the last event delivered; a partition it does not name starts at its
// beginning. It survives partition moves (a move keeps event IDs). Its
// text form is the unpadded base64url encoding of the JSON object
// {"<partition>":"<event ID>",…}, keys sorted.
type feedCursor map[string]uuid.UUID

// String returns the cursor's text form.
func (c feedCursor) String() string {
	m := make(map[string]string, len(c))
	for p, id := range c {
		m[p] = id.String()
	}
	b, _ := json.Marshal(m) // a map of strings always marshals; keys sorted
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseFeedCursor parses a cursor's text form (feedCursor.String), checking
// that it only names partitions in partitions. The error says what is wrong
// and what to give; which names where the cursor came from.
func parseFeedCursor(s, which string, partitions []string) (feedCursor, error) {
	give := "give an id as sent in the stream's id fields (unpadded base64url of a JSON object from partition names to event IDs), or start from the beginning without it"
	if len(s) > maxCursorLength {
		return nil, fmt.Errorf("%s is %d bytes long, more than the %d of any cursor; %s", which, len(s), maxCursorLength, give)
	}
	if _, err := journal.ParsePosition(s); err == nil {
		return nil, fmt.Errorf("%s is %s, a position of one database; across several databases the ids are cursors naming each partition's last event (positions differ per database and change with a move); %s", which, strconv.Quote(s), give)
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s is %s, which is not unpadded base64url (%v); %s", which, strconv.Quote(truncate(s, 64)), err, give)
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%s is %s, which does not decode to a JSON object of event IDs by partition; %s", which, strconv.Quote(truncate(s, 64)), give)
	}
	c := make(feedCursor, len(m))
	for _, p := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(partitions, p) {
			return nil, fmt.Errorf("%s names partition %s, which this server does not serve (it serves %s); %s", which, strconv.Quote(truncate(p, 64)), strings.Join(partitions, ", "), give)
		}
		id, err := uuid.Parse(m[p])
		if err != nil || id == uuid.Nil {
			return nil, fmt.Errorf("%s gives %s as partition %q's last event, which is not an event ID (a UUID); %s", which, strconv.Quote(truncate(m[p], 64)), p, give)
		}
		c[p] = id
	}
	return c, nil
}

// checkFeedCursor checks that each event c names is stored in the
// partition c names it for. A missing event or one of another partition
// is a client error (invalidRequest); a failed read is classified (a
// database that cannot be reached is errUnavailable: 503).
func checkFeedCursor(ctx context.Context, pf partitionFeed, c feedCursor, which string) error {
	for _, p := range slices.Sorted(maps.Keys(c)) {
		rec, err := pf.ReadEvent(ctx, c[p])
		switch {
		case errors.Is(err, journal.ErrNotFound):
			return invalidRequest(fmt.Sprintf("%s names event %s as partition %q's last event, and no database holds that event; resume with an id this server's stream sent, or start from the beginning without it", which, c[p], p))
		case err != nil:
			return classify(fmt.Errorf("read event %s, the cursor's last event of partition %q: %w", c[p], p, err)) // unreachable database: 503
		case rec.Partition() != p:
			return invalidRequest(fmt.Sprintf("%s names event %s as partition %q's last event, but that event is in partition %q; resume with an id this server's stream sent, unchanged", which, c[p], p, rec.Partition()))
		}
	}
	return nil
}

// feedItem is a record of the feed, or the error that ends it.
type feedItem struct {
	rec journal.Record
	err error
}

// followRetryMin and followRetryMax bound the backoff of a partition whose
// feed failed with a retryable error (journal.ErrUnavailable: its database
// cannot be reached, or the partition is moving in).
const (
	followRetryMin = 50 * time.Millisecond
	followRetryMax = 2 * time.Second
)

// followPartitions streams every partition of partitions after c (read
// before it returns; the caller may change c afterwards) into the
// returned channel: one goroutine per partition, each sending its
// partition's records in order, so the channel holds each partition in
// order and the partitions interleaved. A retryable failure
// (journal.ErrUnavailable) of one partition is retried after a backoff
// from the last record sent (noted through note); any other failure is
// sent as an item with err set and ends that partition's goroutine. The
// channel is closed once every goroutine has ended (ctx done).
func followPartitions(ctx context.Context, pf partitionFeed, partitions []string, c feedCursor, note func(error)) <-chan feedItem {
	out := make(chan feedItem, 256)
	var wg sync.WaitGroup
	for _, p := range partitions {
		afterID := c[p] // read here: the caller advances c as it delivers
		wg.Add(1)
		go func() {
			defer wg.Done()
			followPartition(ctx, pf, p, afterID, out, note)
		}()
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	return out
}

// followPartition is one partition's goroutine of followPartitions.
func followPartition(ctx context.Context, pf partitionFeed, p string, afterID uuid.UUID, out chan<- feedItem, note func(error)) {
	send := func(it feedItem) bool {
		select {
		case out <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var member string
	var at journal.Position
	located := func(m string, pos journal.Position) { member, at = m, pos }
	backoff := followRetryMin
	for {
		var failed error
		for rec, err := range pf.FollowPartition(ctx, journal.Query{Partition: p, All: true}, member, at, afterID, located) {
			if err != nil {
				failed = err
				break
			}
			if rec.ID == uuid.Nil {
				break // FollowPartition's end when the subscription ended without an error (ctx done)
			}
			if !send(feedItem{rec: rec}) {
				return
			}
			at, afterID, backoff = rec.Position, rec.ID, followRetryMin
		}
		if ctx.Err() != nil {
			return
		}
		if failed == nil {
			failed = fmt.Errorf("partition %q: the feed ended", p)
		}
		if !errors.Is(failed, journal.ErrUnavailable) {
			send(feedItem{err: failed})
			return
		}
		note(failed)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, followRetryMax)
	}
}
