package natssink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
)

// Config says where a Sink publishes. Exactly one of Subject and
// SubjectPrefix is set.
type Config struct {
	// Subject is the subject of every event, e.g. "bank.events". No default.
	Subject string
	// SubjectPrefix, instead of Subject, publishes each event to the prefix,
	// a dot and the event's type ("bank.events" → "bank.events.MoneyDeposited";
	// a stream with subject "bank.events.>" stores them all). An event whose
	// type cannot be a subject token (empty, or with whitespace, '*' or '>')
	// fails permanently (a dead letter). A dot in a type adds a token. No
	// default.
	SubjectPrefix string
	// Stream, when set, is the name of the stream that must store the
	// messages: JetStream refuses a publish to a subject that another stream
	// stores (header Nats-Expected-Stream), and the publisher retries it.
	// Default "": any stream whose subjects include the subject.
	Stream string
	// AckTimeout is the longest one Publish waits for JetStream's
	// acknowledgement (the caller's context may end it sooner). Default 5s.
	AckTimeout time.Duration
}

// Sink publishes events to JetStream; see the package comment for the
// message format and guarantees. It is safe for concurrent use.
type Sink struct {
	js  jetstream.JetStream
	cfg Config
}

var _ projection.Sink = (*Sink)(nil)

// New returns a Sink publishing through js. It does no I/O: a missing stream
// shows as Publish errors (retried by the publisher), each naming the
// subject that no stream stores.
func New(js jetstream.JetStream, cfg Config) (*Sink, error) {
	if js == nil {
		return nil, errors.New("natssink: the JetStream handle is nil; pass jetstream.New(nc) or use NewFromConn")
	}
	switch {
	case cfg.Subject == "" && cfg.SubjectPrefix == "":
		return nil, errors.New("natssink: Config needs Subject (one subject for every event) or SubjectPrefix (prefix.EventType)")
	case cfg.Subject != "" && cfg.SubjectPrefix != "":
		return nil, fmt.Errorf("natssink: Config sets both Subject %q and SubjectPrefix %q; set one", cfg.Subject, cfg.SubjectPrefix)
	case cfg.AckTimeout < 0:
		return nil, fmt.Errorf("natssink: Config.AckTimeout is %s; use a positive duration or 0 for the default 5s", cfg.AckTimeout)
	}
	if cfg.Subject != "" {
		if err := validSubject(cfg.Subject); err != nil {
			return nil, fmt.Errorf("natssink: Config.Subject: %w", err)
		}
	} else if err := validSubject(cfg.SubjectPrefix); err != nil {
		return nil, fmt.Errorf("natssink: Config.SubjectPrefix: %w", err)
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = 5 * time.Second
	}
	return &Sink{js: js, cfg: cfg}, nil
}

// NewFromConn returns a Sink publishing through JetStream on nc (see New).
// The caller keeps ownership of nc: closing the sink's publisher does not
// close it.
func NewFromConn(nc *nats.Conn, cfg Config) (*Sink, error) {
	if nc == nil {
		return nil, errors.New("natssink: the NATS connection is nil; pass the *nats.Conn from nats.Connect")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("natssink: %w", err)
	}
	return New(js, cfg)
}

// validSubject reports why s is not a literal NATS subject (nil when it is).
func validSubject(s string) error {
	if s == "" {
		return errors.New("the subject is empty")
	}
	for tok := range strings.SplitSeq(s, ".") {
		switch {
		case tok == "":
			return fmt.Errorf("subject %q has an empty token (a leading, trailing or double dot)", s)
		case tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n"):
			return fmt.Errorf("subject %q has token %q: a published subject has no wildcards or whitespace", s, tok)
		}
	}
	return nil
}

// Subject returns the subject rec is published to.
func (s *Sink) Subject(rec journal.Record) (string, error) {
	if s.cfg.Subject != "" {
		return s.cfg.Subject, nil
	}
	subj := s.cfg.SubjectPrefix + "." + rec.Type
	if err := validSubject(subj); err != nil {
		return "", fmt.Errorf("natssink: event %s of type %q: %w; use Config.Subject (one subject) for such types", rec.ID, rec.Type, err)
	}
	return subj, nil
}

// Publish implements projection.Sink: it returns nil once JetStream
// acknowledged the message (also as a duplicate of one it already stored).
// An event that can never be published (its subject is invalid, it cannot
// be encoded, or it exceeds the server's maximum payload) fails with a
// projection.Permanent error; any other failure (no stream stores the
// subject, no acknowledgement within AckTimeout, a disconnection) is
// retried by the publisher. It ends when ctx does.
func (s *Sink) Publish(ctx context.Context, rec journal.Record) error {
	subj, err := s.Subject(rec)
	if err != nil {
		return projection.Permanent(err)
	}
	body, err := json.Marshal(projection.NewMessage(rec))
	if err != nil {
		return projection.Permanent(fmt.Errorf("natssink: encode event %s: %w", rec.ID, err))
	}
	msg := &nats.Msg{Subject: subj, Data: body, Header: nats.Header{}}
	msg.Header.Set("Content-Type", "application/json")
	msg.Header.Set("Scribe-Event-Type", rec.Type)
	msg.Header.Set("Scribe-Position", rec.Position.String())
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(rec.ID.String())}
	if s.cfg.Stream != "" {
		opts = append(opts, jetstream.WithExpectStream(s.cfg.Stream))
	}
	actx, cancel := context.WithTimeout(ctx, s.cfg.AckTimeout)
	defer cancel()
	_, err = s.js.PublishMsg(actx, msg, opts...)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("natssink: publish event %s to %q: %w", rec.ID, subj, ctx.Err())
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("natssink: publish event %s: no JetStream stream stores subject %q: create one with a dedup window past an outage (nats stream add EVENTS --subjects %q --dupe-window 10m); the publisher retries",
			rec.ID, subj, s.streamSubjects())
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("natssink: publish event %s to %q: no acknowledgement from JetStream within %s (is the server reachable and the stream's leader elected?): %w", rec.ID, subj, s.cfg.AckTimeout, err)
	case errors.Is(err, nats.ErrMaxPayload):
		return projection.Permanent(fmt.Errorf("natssink: publish event %s to %q: the message (%d bytes) exceeds the server's max_payload: %w", rec.ID, subj, len(body), err))
	default:
		return fmt.Errorf("natssink: publish event %s to %q: %w", rec.ID, subj, err)
	}
}

// streamSubjects is the subject filter a stream for this sink needs.
func (s *Sink) streamSubjects() string {
	if s.cfg.Subject != "" {
		return s.cfg.Subject
	}
	return s.cfg.SubjectPrefix + ".>"
}
