package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
)

// readSide is what the read endpoints need: the accounts read model and the
// journal's feed.
type readSide struct {
	// List returns up to limit accounts with IDs after after, ordered by ID.
	List func(ctx context.Context, after string, limit int) ([]AccountView, error)
	// Progress is the read model runner's view (checkpoint, lag, state).
	Progress func() projection.Progress
	// Feed streams the journal's events for GET /events/stream (nil: 404).
	// With partitions on several databases the stream reads the service's
	// journal partition by partition instead (partitionFeeder, feed.go).
	Feed journal.Subscriber
}

// singleParams parses r's query, allowing only the names in allowed (each
// at most once); the error names the offending parameter and what to give.
func singleParams(r *http.Request, allowed map[string]string) (map[string]string, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, invalidRequest(fmt.Sprintf("the query string %s is malformed (%v)", strconv.Quote(truncate(r.URL.RawQuery, 200)), err))
	}
	out := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if _, ok := allowed[name]; !ok {
			var help []string
			for _, n := range slices.Sorted(maps.Keys(allowed)) {
				help = append(help, fmt.Sprintf("%q (%s)", n, allowed[n]))
			}
			return nil, invalidRequest(fmt.Sprintf("unknown query parameter %s; this request accepts %s", strconv.Quote(truncate(name, 64)), strings.Join(help, ", ")))
		}
		if n := len(q[name]); n > 1 {
			return nil, invalidRequest(fmt.Sprintf("query parameter %q is given %d times; give it once", name, n))
		}
		out[name] = q[name][0]
	}
	return out, nil
}

// listAccounts serves GET /accounts: a page of accounts ordered by ID from
// the read model, with a Link rel="next" header when more may follow. The
// read model trails the accounts by the projection's lag: the
// Scribe-Read-Model-Checkpoint and Scribe-Read-Model-Lag headers say how far
// it is (GET /accounts/{id} is always current).
func (a *api) listAccounts(w http.ResponseWriter, r *http.Request) response {
	if a.read == nil || a.read.List == nil {
		return errorResponse(codeNotFound, "this server runs without the accounts read model")
	}
	q, err := singleParams(r, map[string]string{
		"after": "the last account ID of the previous page",
		"limit": fmt.Sprintf("the page size, 1 to %d, default %d", maxAccountsPage, defaultAccountsPage),
	})
	if err != nil {
		return a.clientError(err)
	}
	limit := defaultAccountsPage
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAccountsPage {
			return a.clientError(invalidRequest(fmt.Sprintf("query parameter \"limit\" is %s; give a page size: an integer from 1 to %d", strconv.Quote(truncate(v, 64)), maxAccountsPage)))
		}
		limit = n
	}
	after := q["after"]
	if len(after) > bank.MaxIDLength {
		return a.clientError(invalidRequest(fmt.Sprintf("query parameter \"after\" is %d bytes; account IDs have at most %d", len(after), bank.MaxIDLength)))
	}
	accounts, err := a.read.List(r.Context(), after, limit)
	if err != nil {
		return a.failure(r.Context(), "list accounts", err)
	}
	if accounts == nil {
		accounts = []AccountView{}
	}
	if len(accounts) == limit {
		w.Header().Set("Link", fmt.Sprintf(`</accounts?after=%s&limit=%d>; rel="next"`, url.QueryEscape(accounts[len(accounts)-1].ID), limit))
	}
	if a.read.Progress != nil {
		p := a.read.Progress()
		w.Header().Set("Scribe-Read-Model-Checkpoint", p.Checkpoint.String())
		w.Header().Set("Scribe-Read-Model-Lag", strconv.FormatFloat(p.Lag.Seconds(), 'f', 3, 64))
	}
	return jsonResponse(http.StatusOK, accounts)
}

// StreamEvent is one event of GET /events/stream (the data of an SSE
// message). With one database the message's id is the position; with
// partitions on several databases (-db2) it is a feed cursor, and EventID
// and Partition are set (Position is then the event's position on the
// database serving its partition when it was sent: it changes when the
// partition moves, the event ID does not).
type StreamEvent struct {
	Position   string          `json:"position"`
	EventID    string          `json:"eventId,omitempty"`
	Partition  string          `json:"partition,omitempty"`
	Type       string          `json:"type"`
	Tags       []journal.Tag   `json:"tags"`
	Data       json.RawMessage `json:"data"`
	RecordedAt time.Time       `json:"recordedAt"`
}

// sseHeartbeat is how often an idle event stream sends a comment line, so
// that proxies keep it open and a vanished client is noticed.
const sseHeartbeat = 15 * time.Second

// maxEventStreams bounds the event streams served at once.
const maxEventStreams = 256

// eventStream serves GET /events/stream: server-sent events, one per
// journal event, first the stored ones after the starting point, then live
// ones as they commit. A client that reconnects with Last-Event-ID (as
// browsers' EventSource do) resumes right after the last event it got,
// without gaps or repeats; ?from=<id> starts there when there is no
// Last-Event-ID; without either the stream starts at the beginning.
//
// With one database the events come in position order and each message's
// id is the event's position ("commit.seq").
//
// With partitions on several databases (-db2) each partition is read on
// the database serving it now and the partitions are merged as their
// events come: each partition's events in the partition's order, and no
// order between partitions. A partition move (there and back) is followed
// by event ID, without repeating or skipping an event. Each message's id is
// a feed cursor (feedCursor: per partition, the last event delivered), which
// survives moves; a position is refused there (400), as is a malformed
// cursor or one naming an event no database holds.
func (a *api) eventStream(w http.ResponseWriter, r *http.Request) {
	fail := func(resp response) {
		w.Header().Set("Content-Type", "application/json")
		if resp.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(resp.retryAfter))
		}
		w.WriteHeader(resp.status)
		_, _ = w.Write(resp.body)
	}
	if a.read == nil || a.read.Feed == nil {
		fail(errorResponse(codeNotFound, "this server runs without an event feed"))
		return
	}
	pf := a.partitionFeed()
	fromHelp := "start after this position, \"commit.seq\""
	if pf != nil {
		fromHelp = "start after this cursor, an id the stream sent"
	}
	q, err := singleParams(r, map[string]string{"from": fromHelp})
	if err != nil {
		fail(a.clientError(err))
		return
	}
	start, which := q["from"], "query parameter \"from\""
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		start, which = id, "the Last-Event-ID header"
	}
	var after journal.Position
	var cursor feedCursor
	var partitions []string
	if pf != nil {
		partitions = pf.FeedPartitions()
		cursor = feedCursor{}
		if start != "" {
			if cursor, err = parseFeedCursor(start, which, partitions); err != nil {
				fail(a.clientError(invalidRequest(err.Error())))
				return
			}
			if err := checkFeedCursor(r.Context(), pf, cursor, which); err != nil {
				fail(a.failure(r.Context(), "event stream", err))
				return
			}
		}
	} else if start != "" {
		if after, err = journal.ParsePosition(start); err != nil {
			fail(a.clientError(invalidRequest(fmt.Sprintf("%s is %s; give an event position as sent in the stream's id fields (\"commit.seq\")", which, strconv.Quote(truncate(start, 64))))))
			return
		}
	}
	select {
	case a.streams <- struct{}{}:
		defer func() { <-a.streams }()
	default:
		resp := errorResponse(codeOverloaded, fmt.Sprintf("%d event streams are open, this server's limit; retry after the Retry-After delay", maxEventStreams))
		w.Header().Set("Retry-After", "5")
		fail(resp)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	ctx, cancel := context.WithCancel(r.Context())
	var feed <-chan feedItem
	if pf != nil {
		feed = followPartitions(ctx, pf, partitions, cursor, func(err error) { a.shed.note("event stream", err) })
	} else {
		ch := make(chan feedItem, 256)
		feed = ch
		go func() {
			defer close(ch)
			for rec, err := range a.read.Feed.Subscribe(ctx, journal.Query{All: true, AllPartitions: true}, after) {
				select {
				case ch <- feedItem{rec, err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
	defer func() {
		cancel()
		for range feed { // wait for the feed's goroutines to end
		}
	}()
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(sseHeartbeat))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write([]byte(": scribe event stream\nretry: 2000\n\n")) {
		return
	}
	heartbeat := time.NewTicker(sseHeartbeat)
	defer heartbeat.Stop()
	var buf []byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.closing:
			return
		case <-heartbeat.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		case it, ok := <-feed:
			if !ok {
				return
			}
			if it.err != nil {
				if ctx.Err() == nil {
					a.shed.note("event stream", it.err)
					_ = write([]byte("event: error\ndata: {\"error\":\"the event feed failed; reconnect to resume\"}\n\n"))
				}
				return
			}
			ev := StreamEvent{Position: it.rec.Position.String(), Type: it.rec.Type, Tags: it.rec.Tags, Data: it.rec.Data, RecordedAt: it.rec.RecordedAt}
			id := ev.Position
			if cursor != nil {
				ev.EventID, ev.Partition = it.rec.ID.String(), it.rec.Partition()
				cursor[ev.Partition] = it.rec.ID
				id = cursor.String()
			}
			body, err := json.Marshal(ev)
			if err != nil {
				return
			}
			buf = append(buf[:0], "id: "...)
			buf = append(buf, id...)
			buf = append(buf, "\nevent: "...)
			buf = append(buf, it.rec.Type...)
			buf = append(buf, "\ndata: "...)
			buf = append(buf, body...)
			buf = append(buf, "\n\n"...)
			if !write(buf) {
				return
			}
		}
	}
}
