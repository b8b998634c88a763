package projection

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/scribe-es/scribe/journal"
)

// Sink receives published events.
type Sink interface {
	// Publish delivers rec and returns nil only once the receiver has it.
	// Return Permanent(err) for a failure no retry can fix (the record is
	// dead-lettered at once); any other error is retried.
	Publish(ctx context.Context, rec journal.Record) error
}

// permanentError marks an error retries cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as one that retrying cannot fix.
func Permanent(err error) error { return permanentError{err} }

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool { return errors.As(err, new(permanentError)) }

// PublisherOptions tune a publisher's deliveries. The zero value is valid.
type PublisherOptions struct {
	// Attempts is how many times one event is offered to the sink before it
	// is dead-lettered. Default 5.
	Attempts int
	// Backoff is the pause after the first failed attempt; it doubles up to
	// MaxBackoff. Defaults 100ms and 5s.
	Backoff, MaxBackoff time.Duration
}

// NewPublisher returns a runner that publishes every event q selects (the
// zero Query: every event) to sink, after it is persisted: publish after
// persist, with the journal as the outbox.
//
// Guarantees: events are offered one at a time in position order (a
// stream's in version order); the checkpoint moves past an event only once
// Publish returned nil, so every event is published at least once, maybe
// again after a crash (receivers deduplicate by event ID). An event the
// sink refuses Attempts times, or permanently, is stored as a dead letter
// with the checkpoint that passes it, and publishing goes on; a requested
// replay (DeadLetterReplayer.RequestReplay) offers it once more within
// Options.ReplayInterval. Deliveries happen outside the store's
// transaction (Projection.Prepare), so a slow sink never holds one open.
// Options.BatchSize defaults to 64 here.
func NewPublisher[Tx any](src Source, store Store[Tx], name string, q journal.Query, sink Sink, po PublisherOptions, o Options) (*Runner[Tx], error) {
	if sink == nil {
		return nil, fmt.Errorf("projection: publisher %q: the sink is nil", name)
	}
	po.Attempts, po.Backoff, po.MaxBackoff = cmp.Or(po.Attempts, 5), cmp.Or(po.Backoff, 100*time.Millisecond), cmp.Or(po.MaxBackoff, 5*time.Second)
	if po.Attempts < 0 || po.Backoff < 0 || po.MaxBackoff < po.Backoff {
		return nil, fmt.Errorf("projection: publisher %q: PublisherOptions %+v: Attempts and Backoff must be positive and Backoff ≤ MaxBackoff", name, po)
	}
	o.BatchSize = cmp.Or(o.BatchSize, 64)
	p := &publisher[Tx]{store: store, key: Key{Name: name, Version: 1}, sink: sink, o: po}
	r, err := NewRunner(src, store, Projection[Tx]{Name: name, Version: 1, Query: q, Prepare: p.deliver, Handle: p.record, Replay: p.replay}, o)
	if err != nil {
		return nil, err
	}
	m := r.o.MeterProvider.Meter("github.com/scribe-es/scribe/projection")
	if p.published, err = m.Int64Counter("scribe.publisher.events", metric.WithUnit("{event}"),
		metric.WithDescription("Events the sink accepted.")); err != nil {
		return nil, err
	}
	if p.dead, err = m.Int64Counter("scribe.publisher.dead_letters", metric.WithUnit("{event}"),
		metric.WithDescription("Events dead-lettered after the sink refused them.")); err != nil {
		return nil, err
	}
	p.attrs = r.attrs
	return r, nil
}

type publisher[Tx any] struct {
	store     Store[Tx]
	key       Key
	sink      Sink
	o         PublisherOptions
	published metric.Int64Counter
	dead      metric.Int64Counter
	attrs     metric.MeasurementOption
}

// deliver offers each record to the sink, retrying, and leaves the records
// it gave up on in b.Prepared for record.
func (p *publisher[Tx]) deliver(ctx context.Context, b *Batch) error {
	var letters []DeadLetter
	for _, rec := range b.Records {
		delay := p.o.Backoff
		var err error
		attempts := 0
		for attempts < p.o.Attempts {
			attempts++
			if err = p.sink.Publish(ctx, rec); err == nil || IsPermanent(err) {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if attempts < p.o.Attempts && !sleep(ctx, delay) {
				return ctx.Err()
			}
			delay = min(2*delay, p.o.MaxBackoff)
		}
		if err == nil {
			p.published.Add(context.WithoutCancel(ctx), 1, p.attrs)
			continue
		}
		letters = append(letters, DeadLetter{Key: p.key, Record: rec, Error: err.Error(), Attempts: attempts, At: time.Now().UTC()})
	}
	b.Prepared = letters
	return nil
}

// replay offers a dead letter to the sink once more (one attempt: a
// failure keeps the letter with the new error).
func (p *publisher[Tx]) replay(ctx context.Context, _ Tx, d DeadLetter) error {
	if err := p.sink.Publish(ctx, d.Record); err != nil {
		return err
	}
	p.published.Add(context.WithoutCancel(ctx), 1, p.attrs)
	return nil
}

// record stores the batch's dead letters with its checkpoint.
func (p *publisher[Tx]) record(ctx context.Context, tx Tx, b Batch) error {
	letters, _ := b.Prepared.([]DeadLetter)
	for _, d := range letters {
		if err := p.store.DeadLetter(ctx, tx, d); err != nil {
			return err
		}
	}
	p.dead.Add(context.WithoutCancel(ctx), int64(len(letters)), p.attrs)
	return nil
}

// ChannelSink publishes to a channel: Publish returns once the channel took
// the record (or ctx ended).
type ChannelSink chan<- journal.Record

// Publish implements Sink.
func (c ChannelSink) Publish(ctx context.Context, rec journal.Record) error {
	select {
	case c <- rec:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Message is the JSON body WebhookSink posts: the event and its place in
// the journal.
type Message struct {
	ID            string           `json:"id"`
	Type          string           `json:"type"`
	SchemaVersion int              `json:"schemaVersion"`
	Partition     string           `json:"partition"`
	Tags          []journal.Tag    `json:"tags"`
	Versions      []uint64         `json:"versions"`
	Position      journal.Position `json:"position"`
	RecordedAt    time.Time        `json:"recordedAt"`
	Data          json.RawMessage  `json:"data"`
	Metadata      journal.Metadata `json:"metadata"`
}

// NewMessage renders rec as a Message.
func NewMessage(rec journal.Record) Message {
	m := Message{ID: rec.ID.String(), Type: rec.Type, SchemaVersion: rec.SchemaVersion, Partition: rec.Metadata.Partition,
		Tags: rec.Tags, Position: rec.Position, RecordedAt: rec.RecordedAt, Data: rec.Data, Metadata: rec.Metadata}
	for _, l := range rec.Links {
		m.Versions = append(m.Versions, l.Version)
	}
	return m
}

// WebhookSink POSTs each event as a JSON Message to URL. The request carries
// Idempotency-Key (the event ID) for receivers to drop repeats. A 2xx
// response is a delivery; 408, 425, 429 and 5xx responses and transport
// errors are retried; any other status is permanent (dead-lettered).
type WebhookSink struct {
	URL string
	// Client sends the requests; default an http.Client with a 10s timeout.
	Client *http.Client
	// Header is added to every request (for example Authorization).
	Header http.Header
}

var defaultWebhookClient = &http.Client{Timeout: 10 * time.Second}

// Publish implements Sink.
func (s *WebhookSink) Publish(ctx context.Context, rec journal.Record) error {
	body, err := json.Marshal(NewMessage(rec))
	if err != nil {
		return Permanent(fmt.Errorf("webhook: encode event %s: %w", rec.ID, err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return Permanent(fmt.Errorf("webhook: URL %q: %w", s.URL, err))
	}
	for k, v := range s.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", rec.ID.String())
	req.Header.Set("Scribe-Event-Type", rec.Type)
	req.Header.Set("Scribe-Position", rec.Position.String())
	c := s.Client
	if c == nil {
		c = defaultWebhookClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: POST %s: %w", s.URL, err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly, code == http.StatusTooManyRequests, code >= 500:
		return fmt.Errorf("webhook: POST %s: HTTP %d: %s", s.URL, code, bytes.TrimSpace(snippet))
	default:
		return Permanent(fmt.Errorf("webhook: POST %s: HTTP %s: %s", s.URL, strconv.Itoa(code), bytes.TrimSpace(snippet)))
	}
}
