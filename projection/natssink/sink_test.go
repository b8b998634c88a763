package natssink_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/projection"
	"github.com/scribe-es/scribe/projection/natssink"
)

// envNATSURL names the NATS server the tests use; default nats://127.0.0.1:4222.
const envNATSURL = "SCRIBE_TEST_NATS_URL"

func natsURL() string {
	if u := os.Getenv(envNATSURL); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// connect returns a connection to the test NATS server (JetStream enabled),
// closed at cleanup. Without a server the test skips loudly, or fails when
// SCRIBE_REQUIRE_POSTGRES=1 (CI requires every service of the test command).
func connect(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(natsURL(), nats.Timeout(2*time.Second))
	if err != nil {
		msg := "!!! no NATS server answers at " + natsURL() + " (" + err.Error() + "): this JetStream test did not run. " +
			"Run `make test` (it starts nats-server -js when none answers) or set " + envNATSURL
		if os.Getenv("SCRIBE_REQUIRE_POSTGRES") == "1" {
			t.Fatal(msg + " (SCRIBE_REQUIRE_POSTGRES=1 requires the test services)")
		}
		t.Skip(msg)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("the NATS server at %s has no JetStream (%v): start it with -js", natsURL(), err)
	}
	return nc, js
}

// newStream creates a stream with a unique name storing prefix.> (prefix
// unique too), with a 10 minute duplicate window, and deletes it at
// cleanup. It returns the stream and the prefix.
func newStream(t *testing.T, js jetstream.JetStream) (jetstream.Stream, string) {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	name, prefix := "SCRIBE_TEST_"+strings.ToUpper(id), "scribetest."+id
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".>"},
		Duplicates: 10 * time.Minute, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Errorf("delete stream %s: %v", name, err)
		}
	})
	return st, prefix
}

// streamMessages reads every message of st in stream order.
func streamMessages(t *testing.T, st jetstream.Stream) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	info, err := st.Info(ctx)
	require.NoError(t, err)
	want := int(info.State.Msgs)
	if want == 0 {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	var out []jetstream.Msg
	for len(out) < want {
		batch, err := cons.Fetch(min(want-len(out), 500), jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			out = append(out, m)
			n++
		}
		require.NoError(t, batch.Error())
		require.NotZero(t, n, "the stream reported %d messages, %d read", want, len(out))
	}
	return out
}

func records(t *testing.T, j journal.Journal, typ string, n int) []journal.Record {
	t.Helper()
	var out []journal.Record
	for i := range n {
		res, err := j.Append(context.Background(), []journal.Event{{ID: journal.NewEventID(), Type: typ, SchemaVersion: 1,
			Tags: []journal.Tag{"s:1"}, Data: []byte(fmt.Sprintf(`{"i":%d}`, i))}}, journal.AppendOptions{})
		require.NoError(t, err)
		out = append(out, res.Records...)
	}
	return out
}

// TestPublish: the message is the projection.Message JSON on prefix.Type,
// with the event ID as Nats-Msg-Id; publishing an event again is
// acknowledged and the stream still holds it once.
func TestPublish(t *testing.T) {
	t.Parallel()
	_, js := connect(t)
	st, prefix := newStream(t, js)
	sink, err := natssink.New(js, natssink.Config{SubjectPrefix: prefix})
	require.NoError(t, err)
	recs := records(t, memory.New(), "MoneyDeposited", 3)
	ctx := t.Context()
	for _, r := range recs {
		require.NoError(t, sink.Publish(ctx, r))
	}
	require.NoError(t, sink.Publish(ctx, recs[1]), "a repeat is acknowledged")
	msgs := streamMessages(t, st)
	require.Len(t, msgs, 3, "the broker dropped the repeat")
	for i, m := range msgs {
		require.Equal(t, prefix+".MoneyDeposited", m.Subject())
		require.Equal(t, recs[i].ID.String(), m.Headers().Get(jetstream.MsgIDHeader))
		require.Equal(t, "MoneyDeposited", m.Headers().Get("Scribe-Event-Type"))
		require.Equal(t, recs[i].Position.String(), m.Headers().Get("Scribe-Position"))
		want, err := json.Marshal(projection.NewMessage(recs[i]))
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(m.Data()))
	}

	// One fixed subject, bound to the named stream.
	info, err := st.Info(ctx)
	require.NoError(t, err)
	fixed, err := natssink.New(js, natssink.Config{Subject: prefix + ".all", Stream: info.Config.Name})
	require.NoError(t, err)
	require.NoError(t, fixed.Publish(ctx, records(t, memory.New(), "Other", 1)[0]))
	msgs = streamMessages(t, st)
	require.Len(t, msgs, 4)
	require.Equal(t, prefix+".all", msgs[3].Subject())
}

// TestPublishErrors: no stream for the subject is a retryable error naming
// the subject and how to create the stream; a type that cannot be a subject
// token is permanent; an ended context ends Publish; bad configurations are
// refused by New.
func TestPublishErrors(t *testing.T) {
	t.Parallel()
	nc, js := connect(t)
	_, prefix := newStream(t, js)
	rec := records(t, memory.New(), "E", 1)[0]
	ctx := t.Context()

	nowhere, err := natssink.NewFromConn(nc, natssink.Config{SubjectPrefix: "scribetest.nostream." + strings.ReplaceAll(rec.ID.String(), "-", "")})
	require.NoError(t, err)
	err = nowhere.Publish(ctx, rec)
	require.Error(t, err)
	require.False(t, projection.IsPermanent(err), "the stream may be created: the publisher retries")
	require.ErrorContains(t, err, "no JetStream stream stores subject \"scribetest.nostream.")
	require.ErrorContains(t, err, "--subjects \"scribetest.nostream.")
	require.ErrorContains(t, err, "--dupe-window")

	sink, err := natssink.New(js, natssink.Config{SubjectPrefix: prefix})
	require.NoError(t, err)
	bad := rec
	bad.Type = "Money Deposited"
	err = sink.Publish(ctx, bad)
	require.True(t, projection.IsPermanent(err), "%v", err)
	require.ErrorContains(t, err, `type "Money Deposited"`)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err = sink.Publish(cctx, rec)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, projection.IsPermanent(err))

	wrong, err := natssink.New(js, natssink.Config{SubjectPrefix: prefix, Stream: "NOT_THIS_ONE"})
	require.NoError(t, err)
	err = wrong.Publish(ctx, rec)
	require.Error(t, err)
	require.False(t, projection.IsPermanent(err))

	for _, c := range []natssink.Config{{}, {Subject: "a", SubjectPrefix: "b"}, {Subject: "a.*"}, {SubjectPrefix: "a..b"}, {Subject: "a", AckTimeout: -1}} {
		_, err := natssink.New(js, c)
		require.Error(t, err, "%+v", c)
	}
	_, err = natssink.New(nil, natssink.Config{Subject: "a"})
	require.Error(t, err)
	_, err = natssink.NewFromConn(nil, natssink.Config{Subject: "a"})
	require.Error(t, err)
}

// TestPublisherToJetStream: a publisher on the memory journal delivers
// every event to the stream in position order, and an event the server
// refuses for its size becomes a dead letter at once.
func TestPublisherToJetStream(t *testing.T) {
	t.Parallel()
	nc, js := connect(t)
	st, prefix := newStream(t, js)
	sink, err := natssink.New(js, natssink.Config{SubjectPrefix: prefix})
	require.NoError(t, err)
	j := memory.New()
	recs := records(t, j, "E", 50)
	huge, err := j.Append(context.Background(), []journal.Event{{ID: journal.NewEventID(), Type: "Huge", SchemaVersion: 1,
		Data: []byte(`{"x":"` + strings.Repeat("x", int(nc.MaxPayload())-20) + `"}`)}}, journal.AppendOptions{})
	require.NoError(t, err)
	recs = append(recs, records(t, j, "E", 5)...)
	store := projection.NewMemoryStore()
	pub, err := projection.NewPublisher(j, store, "to-nats", journal.Query{}, sink, projection.PublisherOptions{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
		projection.Options{LeaseTTL: 2 * time.Second, BatchSize: 16})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pub.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	require.NoError(t, pub.WaitFor(wctx, recs[len(recs)-1].Position))
	msgs := streamMessages(t, st)
	require.Len(t, msgs, len(recs))
	for i, m := range msgs {
		require.Equal(t, recs[i].ID.String(), m.Headers().Get(jetstream.MsgIDHeader), "message %d out of position order", i)
	}
	dl, err := store.DeadLetters(ctx, pub.Key())
	require.NoError(t, err)
	require.Len(t, dl, 1)
	require.Equal(t, huge.Records[0].ID, dl[0].Record.ID)
	require.Equal(t, 1, dl[0].Attempts, "too large is permanent: not retried")
	require.Contains(t, dl[0].Error, "max_payload")
}
