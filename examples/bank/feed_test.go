package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/internal/pgtest"
	"github.com/scribe-es/scribe/internal/throwawaypg"
)

// feedMessage is one message of GET /events/stream as a client got it.
type feedMessage struct {
	id    string // the SSE id
	event StreamEvent
}

// feedClient reads GET /events/stream in a goroutine, keeping every
// complete message it got, in order.
type feedClient struct {
	cancel  context.CancelFunc
	done    chan struct{}
	changed chan struct{} // a message arrived or the stream ended (cap 1)

	mu   sync.Mutex
	msgs []feedMessage
	err  error // why the stream ended
}

// openFeed opens GET /events/stream (path may carry a query), resuming
// after lastID when it is not empty.
func openFeed(t *testing.T, ts *testServer, path, lastID string) *feedClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", ts.url+path, nil)
	require.NoError(t, err)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	c := &feedClient{cancel: cancel, done: make(chan struct{}), changed: make(chan struct{}, 1)}
	go func() {
		defer close(c.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var m feedMessage
		var name string
		end := func(err error) {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			c.signal()
		}
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if name == "error" {
					end(fmt.Errorf("the server sent an error event"))
					return
				}
				if m.id != "" {
					c.mu.Lock()
					c.msgs = append(c.msgs, m)
					c.mu.Unlock()
					c.signal()
				}
				m, name = feedMessage{}, ""
			case strings.HasPrefix(line, "id: "):
				m.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && name != "error":
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m.event); err != nil {
					end(fmt.Errorf("message data %q: %w", line, err))
					return
				}
			}
		}
		end(fmt.Errorf("the stream ended: %v", sc.Err()))
	}()
	t.Cleanup(c.close)
	return c
}

func (c *feedClient) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// close disconnects and waits for the reader to end.
func (c *feedClient) close() {
	c.cancel()
	<-c.done
}

// messages returns a copy of the messages got so far.
func (c *feedClient) messages() []feedMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]feedMessage(nil), c.msgs...)
}

// waitFor waits until cond holds of the messages got so far, failing the
// test when the stream ends or ctx ends first.
func (c *feedClient) waitFor(t *testing.T, ctx context.Context, what string, cond func([]feedMessage) bool) {
	t.Helper()
	for {
		c.mu.Lock()
		ok, err := cond(c.msgs), c.err
		n := len(c.msgs)
		c.mu.Unlock()
		if ok {
			return
		}
		if err != nil {
			t.Fatalf("waiting for %s: %v (after %d messages)", what, err, n)
		}
		select {
		case <-c.changed:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v (after %d messages)", what, ctx.Err(), n)
		}
	}
}

// countPartition counts the messages of partition p.
func countPartition(msgs []feedMessage, p string) int {
	n := 0
	for _, m := range msgs {
		if m.event.Partition == p {
			n++
		}
	}
	return n
}

// decodeCursor decodes a feed cursor's text form.
func decodeCursor(t *testing.T, s string) map[string]string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(s)
	require.NoError(t, err, "cursor %q", s)
	var m map[string]string
	require.NoError(t, json.Unmarshal(raw, &m), "cursor %q", raw)
	return m
}

// encodeCursor encodes m as a feed cursor.
func encodeCursor(m map[string]string) string {
	b, _ := json.Marshal(m)
	return base64.RawURLEncoding.EncodeToString(b)
}

// storedEventIDs returns the event IDs of partition in schema on the
// database at url, in position order.
func storedEventIDs(t *testing.T, ctx context.Context, url, schema, partition string) []string {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT id::text FROM `+pgx.Identifier{schema, "events"}.Sanitize()+` WHERE partition = $1 ORDER BY commit_xid, seq`, partition)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
}

// startTwoDatabases starts the bank with partition "east" on a second,
// throwaway Postgres server; it returns the server, both URLs and the
// schema.
func startTwoDatabases(t *testing.T, node string) (ts *testServer, url1, url2, schema string) {
	t.Helper()
	_, schema = pgSchema(t)
	url1 = pgtest.URL(t)
	url2 = throwawaypg.Start(t).URL()
	ts = startTestServerWith(t, serverConfig{Addr: "127.0.0.1:0", NodeID: node, Logger: testLogger(t),
		DatabaseURL: url1, Schema: schema, SecondDatabaseURL: url2, SecondPartition: "east"})
	return ts, url1, url2, schema
}

// TestEventStreamAcrossDatabases: with -db2 the event stream delivers both
// partitions' events, each message's id is a cursor naming each
// partition's last event delivered, resuming with it (Last-Event-ID or
// ?from) continues after it, and every malformed or foreign cursor is a
// 400 that says what is wrong.
func TestEventStreamAcrossDatabases(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second Postgres server")
	}
	ts, _, _, _ := startTwoDatabases(t, "feed-node")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, id := range []string{"west-sse", "east-sse"} {
		require.Equal(t, http.StatusCreated, ts.request("POST", "/accounts", `{"id":"`+id+`"}`).Status)
		r := ts.request("POST", "/accounts/"+id+"/deposit", `{"amount":5}`)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	}

	c := openFeed(t, ts, "/events/stream", "")
	c.waitFor(t, ctx, "two events of each partition", func(m []feedMessage) bool {
		return countPartition(m, "default") == 2 && countPartition(m, "east") == 2
	})
	msgs := c.messages()
	last := map[string]string{}
	for _, m := range msgs {
		require.NotEmpty(t, m.event.EventID)
		last[m.event.Partition] = m.event.EventID
		require.Equal(t, last, decodeCursor(t, m.id), "the id names each partition's last event delivered")
		wantTag := bank.AccountTag("west-sse")
		if m.event.Partition == "east" {
			wantTag = bank.AccountTag("east-sse")
		}
		require.Contains(t, m.event.Tags, wantTag)
	}
	// Live: an event of each partition arrives on the open stream.
	for _, id := range []string{"west-sse", "east-sse"} {
		r := ts.request("POST", "/accounts/"+id+"/withdraw", `{"amount":1}`)
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
	}
	c.waitFor(t, ctx, "the live events", func(m []feedMessage) bool { return len(m) == 6 })
	all := c.messages()
	for _, m := range all[4:] {
		require.Equal(t, bank.TypeMoneyWithdrawn, m.event.Type)
	}

	// Resuming after the fourth message (by header, then by ?from) gives the
	// last two again, nothing else.
	for _, open := range []func() *feedClient{
		func() *feedClient { return openFeed(t, ts, "/events/stream", all[3].id) },
		func() *feedClient { return openFeed(t, ts, "/events/stream?from="+all[3].id, "") },
	} {
		r := open()
		r.waitFor(t, ctx, "the events after the cursor", func(m []feedMessage) bool { return len(m) >= 2 })
		r.close()
		got := r.messages()
		require.Len(t, got, 2)
		require.ElementsMatch(t, []string{all[4].event.EventID, all[5].event.EventID}, []string{got[0].event.EventID, got[1].event.EventID})
	}

	// Bad cursors: each a 400 that says what is wrong.
	var westID, eastID string
	for _, m := range all {
		if m.event.Partition == "default" {
			westID = m.event.EventID
		} else {
			eastID = m.event.EventID
		}
	}
	for _, bad := range []struct{ cursor, says string }{
		{"812.4031", "a position of one database"},
		{"!!not-base64!!", "not unpadded base64url"},
		{base64.RawURLEncoding.EncodeToString([]byte(`[1,2]`)), "does not decode to a JSON object"},
		{base64.RawURLEncoding.EncodeToString([]byte(`null`)), "does not decode to a JSON object"},
		{encodeCursor(map[string]string{"north": eastID}), `partition "north", which this server does not serve`},
		{encodeCursor(map[string]string{"east": "yesterday"}), "not an event ID"},
		{encodeCursor(map[string]string{"east": uuid.NewString()}), "no database holds that event"},
		{encodeCursor(map[string]string{"east": westID}), `that event is in partition "default"`},
		{strings.Repeat("A", maxCursorLength+1), "more than the"},
	} {
		for _, r := range []reply{
			ts.request("GET", "/events/stream", "", "Last-Event-ID", bad.cursor),
			ts.request("GET", "/events/stream?from="+bad.cursor, ""),
		} {
			requireError(t, r, http.StatusBadRequest, bank.CodeInvalidRequest)
			var body struct{ Error string }
			require.NoError(t, json.Unmarshal(r.Body, &body))
			require.Contains(t, body.Error, bad.says)
		}
	}
	requireError(t, ts.request("GET", "/events/stream?since=1", ""), http.StatusBadRequest, bank.CodeInvalidRequest)
}

// depositor deposits 1 into each of accounts in turn, each with its own
// Idempotency-Key, until stop is closed; a 503 (a partition's cut-over, a
// node catching up) is retried with the same key. Any other answer, or a
// deposit not acknowledged within depositBound of its first try, is a
// failure. It returns the deposits acknowledged.
type depositor struct {
	url      string
	prefix   string
	accounts []string
	stop     <-chan struct{}
	started  chan struct{} // closed after the first acknowledged deposit
}

// depositBound is how long a deposit may take, retries included, from its
// first try to its acknowledgement while a partition moves.
const depositBound = 30 * time.Second

func (d *depositor) run(ctx context.Context) (int, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	var once sync.Once
	for n := 0; ; n++ {
		select {
		case <-d.stop:
			return n, nil
		default:
		}
		id := d.accounts[n%len(d.accounts)]
		key := fmt.Sprintf("%s-%d", d.prefix, n)
		first := time.Now()
		for {
			req, err := http.NewRequestWithContext(ctx, "POST", d.url+"/accounts/"+id+"/deposit", bytes.NewReader([]byte(`{"amount":1}`)))
			if err != nil {
				return n, err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			resp, err := client.Do(req)
			if err != nil {
				return n, fmt.Errorf("deposit %s into %s: %w", key, id, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			if resp.StatusCode != http.StatusServiceUnavailable {
				return n, fmt.Errorf("deposit %s into %s: %d %s", key, id, resp.StatusCode, body)
			}
			if time.Since(first) > depositBound {
				return n, fmt.Errorf("deposit %s into %s: still %d %s after %s of retries", key, id, resp.StatusCode, body, depositBound)
			}
			t := time.NewTimer(20 * time.Millisecond) // retry backoff
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return n, ctx.Err()
			}
		}
		once.Do(func() { close(d.started) })
	}
}

// TestPartitionMoveEventStream moves partition east from the second server
// to the first and back (`scribe partition move` there and back) while
// deposits with Idempotency-Keys go into both partitions and a client
// follows GET /events/stream; the client disconnects between the moves and
// reconnects with its Last-Event-ID. At the end the events it got, per
// partition and in order, are exactly the events stored (by event ID, in
// position order): nothing repeated, nothing skipped, across both moves and
// the reconnect. A client that starts afterwards from the beginning gets
// the same. Every deposit is acknowledged within depositBound.
func TestPartitionMoveEventStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second Postgres server and builds cmd/scribe")
	}
	began := time.Now()
	ts, url1, url2, schema := startTwoDatabases(t, "feed-move-node")
	bin := buildScribe(t)
	t.Logf("servers started and cmd/scribe built in %s", time.Since(began).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	west, east := []string{"west-fm0", "west-fm1"}, []string{"east-fm0", "east-fm1", "east-fm2"}
	for _, id := range append(append([]string(nil), west...), east...) {
		require.Equal(t, http.StatusCreated, ts.request("POST", "/accounts", `{"id":"`+id+`"}`).Status)
	}

	c1 := openFeed(t, ts, "/events/stream", "")
	stop := make(chan struct{})
	deps := []*depositor{
		{url: ts.url, prefix: "feed-west", accounts: west, stop: stop, started: make(chan struct{})},
		{url: ts.url, prefix: "feed-east", accounts: east, stop: stop, started: make(chan struct{})},
	}
	var wg sync.WaitGroup
	acked := make([]int, len(deps))
	errs := make([]error, len(deps))
	for i, d := range deps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acked[i], errs[i] = d.run(ctx)
		}()
	}
	stopped := false
	stopWriters := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopWriters()
	for _, d := range deps {
		select {
		case <-d.started:
		case <-ctx.Done():
			t.Fatal("the deposits never started")
		}
	}
	c1.waitFor(t, ctx, "east's deposits on the stream", func(m []feedMessage) bool { return countPartition(m, "east") >= 3+10 })

	move := func(from, to, toName string) {
		t.Helper()
		start := time.Now()
		out, code := runScribe(t, ctx, bin, "partition", "move", "-from", from, "-to", to, "-schema", schema, "-partition", "east", "-to-name", toName, "-batch", "50", "-confirm")
		require.Zero(t, code, "scribe partition move to %s: %s", toName, out)
		require.Contains(t, out, "retire: done")
		t.Logf("moved east to %s in %s", toName, time.Since(start).Round(time.Millisecond))
	}

	// There: east moves to the first server while c1 follows it live.
	move(url2, url1, "db")
	n := countPartition(c1.messages(), "east")
	c1.waitFor(t, ctx, "east's deposits after the move", func(m []feedMessage) bool { return countPartition(m, "east") >= n+10 })

	// c1 disconnects; c2 resumes with its last id.
	c1.close()
	got1 := c1.messages()
	c2 := openFeed(t, ts, "/events/stream", got1[len(got1)-1].id)
	c2.waitFor(t, ctx, "east's deposits after the reconnect", func(m []feedMessage) bool { return countPartition(m, "east") >= 10 })

	// And back: east moves to the second server again while c2 follows it.
	move(url1, url2, "db2")
	n = countPartition(c2.messages(), "east")
	c2.waitFor(t, ctx, "east's deposits after the move back", func(m []feedMessage) bool { return countPartition(m, "east") >= n+10 })
	stopWriters()
	for i, err := range errs {
		require.NoError(t, err, "depositor %d", i)
		require.Positive(t, acked[i])
	}
	member, err := ts.srv.backend.router.MemberOf("east")
	require.NoError(t, err)
	require.Equal(t, "db2", member)

	stored := map[string][]string{
		"default": storedEventIDs(t, ctx, url1, schema, "default"),
		"east":    storedEventIDs(t, ctx, url2, schema, "east"),
	}
	require.Empty(t, storedEventIDs(t, ctx, url1, schema, "east"), "east left the first server")
	require.Len(t, stored["east"], len(east)+acked[1], "every acknowledged deposit into east is stored once")
	complete := func(m []feedMessage) bool {
		return countPartition(m, "default") >= len(stored["default"]) && countPartition(m, "east") >= len(stored["east"])
	}
	c2.waitFor(t, ctx, "every stored event", func(m []feedMessage) bool { return complete(append(append([]feedMessage(nil), got1...), m...)) })
	c2.close()
	got := append(got1, c2.messages()...)
	delivered := func(msgs []feedMessage) map[string][]string {
		out := map[string][]string{}
		for _, m := range msgs {
			out[m.event.Partition] = append(out[m.event.Partition], m.event.EventID)
		}
		return out
	}
	require.Equal(t, stored, delivered(got), "the stream delivered each stored event once, in its partition's order, across both moves and the reconnect")
	t.Logf("%s after the start: delivered %d events of default and %d of east (%d before the reconnect)", time.Since(began).Round(time.Millisecond), len(stored["default"]), len(stored["east"]), len(got1))

	c3 := openFeed(t, ts, "/events/stream", "")
	c3.waitFor(t, ctx, "every stored event from the beginning", complete)
	c3.close()
	require.Equal(t, stored, delivered(c3.messages()))
}
