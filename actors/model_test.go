package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/scribe-es/scribe/journal"
)

// counter is a hand-written actors.Model for tests: state int, events
// "Added" {"n": k}, commands add{n}, failIfAbove{limit}, boom{}.
type counter struct {
	schema int
}

type add struct{ N int }
type addTwice struct{ N int } // two events
type noop struct{}
type boom struct{}   // Decide panics
type poison struct{} // produces an event whose Evolve panics

type added struct{ N int }

var errTooBig = errors.New("counter: too big")

type addUpTo struct{ N, Limit int }

// observe adds N and sends the state it was decided on to Seen (buffered).
type observe struct {
	N    int
	Seen chan<- int
}

// hold adds N after telling Entered that its Decide runs and waiting for
// Proceed to be closed: a test looks at the actor while it decides.
type hold struct {
	N       int
	Entered chan<- struct{}
	Proceed <-chan struct{}
}

func (counter) Name() string { return "counter" }
func (counter) Initial() any { return 0 }
func (c counter) StateSchemaVersion() int {
	if c.schema == 0 {
		return 1
	}
	return c.schema
}

func (counter) Decide(state any, cmd any) ([]any, error) {
	s := state.(int)
	switch c := cmd.(type) {
	case add:
		return []any{added{c.N}}, nil
	case addTwice:
		return []any{added{c.N}, added{c.N}}, nil
	case addUpTo:
		if s+c.N > c.Limit {
			return nil, fmt.Errorf("%w: %d + %d > %d", errTooBig, s, c.N, c.Limit)
		}
		return []any{added{c.N}}, nil
	case observe:
		c.Seen <- s
		return []any{added{c.N}}, nil
	case hold:
		c.Entered <- struct{}{}
		<-c.Proceed
		return []any{added{c.N}}, nil
	case noop:
		return nil, nil
	case boom:
		panic("boom in decide")
	case poison:
		return []any{added{-1 << 40}}, nil
	}
	return nil, fmt.Errorf("unknown command %T", cmd)
}

func (counter) Evolve(state any, ev any) any {
	e := ev.(added)
	if e.N == -1<<40 {
		panic("poisoned event")
	}
	return state.(int) + e.N
}

func (counter) EncodeEvent(_ context.Context, _ journal.StreamID, ev any) (journal.Event, error) {
	e, ok := ev.(added)
	if !ok {
		return journal.Event{}, fmt.Errorf("unknown event %T", ev)
	}
	return journal.Event{Type: "Added", SchemaVersion: 1, Data: json.RawMessage(`{"n":` + strconv.Itoa(e.N) + `}`)}, nil
}

func (counter) DecodeEvent(_ context.Context, rec *journal.Record) (any, error) {
	if rec.Type != "Added" {
		return nil, fmt.Errorf("unknown event type %q", rec.Type)
	}
	var d struct{ N int }
	if err := json.Unmarshal(rec.Data, &d); err != nil {
		return nil, err
	}
	return added{d.N}, nil
}

func (counter) EncodeState(s any) ([]byte, error) { return json.Marshal(s) }
func (counter) DecodeState(b []byte) (any, error) {
	var n int
	err := json.Unmarshal(b, &n)
	return n, err
}
