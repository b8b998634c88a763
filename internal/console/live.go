package console

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
)

// liveEvent is what a live view receives of one new event: where it is and
// what it is, never its data (the page links to it).
type liveEvent struct {
	ID         string        `json:"id"`
	Position   string        `json:"position"`
	Partition  string        `json:"partition"`
	Type       string        `json:"type"`
	Tags       []journal.Tag `json:"tags"`
	RecordedAt time.Time     `json:"recordedAt"`
}

// tick is the per-second summary of the feed.
type tick struct {
	At     time.Time `json:"at"`
	Events int       `json:"events"` // events seen in the last second
	Seen   uint64    `json:"seen"`   // events seen since the console started
	Head   string    `json:"head"`   // the newest position seen
	// Lags are the projections' lags in seconds: the age of the oldest event
	// each has not applied (0 when caught up).
	Lags []projectionLag `json:"lags,omitempty"`
}

type projectionLag struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// message is one server-sent event.
type message struct {
	kind string // "event" or "tick"
	data []byte
}

// hub fans the journal's feed out to the open live views. Each view has a
// buffered channel; a view that cannot keep up misses messages (it is told
// by a "gap" message) instead of holding the feed back.
type hub struct {
	mu      sync.Mutex
	clients map[chan message]bool
	last    tick
	ready   chan struct{} // closed once the follower reached the head
	once    sync.Once
}

func newHub() *hub { return &hub{clients: map[chan message]bool{}, ready: make(chan struct{})} }

func (h *hub) subscribe() chan message {
	c := make(chan message, 256)
	h.mu.Lock()
	h.clients[c] = true
	h.mu.Unlock()
	return c
}

func (h *hub) unsubscribe(c chan message) {
	h.mu.Lock()
	delete(h.clients, c)
	h.mu.Unlock()
}

func (h *hub) broadcast(kind string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		select {
		case c <- message{kind: kind, data: b}:
		default:
			select { // the view is behind: drop the oldest and say so
			case <-c:
			default:
			}
			select {
			case c <- message{kind: "gap", data: []byte("{}")}:
			default:
			}
		}
	}
}

// follow subscribes to every event after the journal's head and broadcasts
// each, with a tick every second. A failed subscription is retried after a
// second (the database may be restarting); it returns when ctx ends.
func (h *hub) follow(ctx context.Context, j *postgres.Journal, lags func(context.Context) []projectionLag, log *slog.Logger) error {
	head, err := j.Head(ctx)
	if err != nil {
		return fmt.Errorf("console: reading the feed's head: %w", err)
	}
	var (
		mu     sync.Mutex
		second int
		seen   uint64
		last   = head
	)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				mu.Lock()
				tk := tick{At: now.UTC(), Events: second, Seen: seen, Head: last.String()}
				second = 0
				mu.Unlock()
				h.mu.Lock()
				watched := len(h.clients) > 0
				h.mu.Unlock()
				if watched { // the lags cost a read per projection: only for open views
					tk.Lags = lags(ctx)
				}
				h.mu.Lock()
				h.last = tk
				h.mu.Unlock()
				h.broadcast("tick", tk)
			}
		}
	}()
	h.once.Do(func() { close(h.ready) })
	for ctx.Err() == nil {
		for r, err := range j.Subscribe(ctx, journal.AllEvents(), last) {
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("console: following the feed failed; retrying in 1 s", "err", err)
				}
				break
			}
			mu.Lock()
			second++
			seen++
			last = r.Position
			mu.Unlock()
			h.broadcast("event", liveEvent{ID: r.ID.String(), Position: r.Position.String(), Partition: r.Partition(), Type: r.Type, Tags: r.Tags, RecordedAt: r.RecordedAt.UTC()})
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// live is the server-sent event stream of the feed: "event" messages for new
// events, "tick" messages each second, "gap" when this view fell behind.
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	fl, ok := startEvents(w)
	if !ok {
		return
	}
	c := s.hub.subscribe()
	defer s.hub.unsubscribe(c)
	fmt.Fprint(w, ": connected\n\n")
	fl.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case m := <-c:
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", m.kind, m.data); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// stats answers the latest tick as JSON (for a page's first paint).
func (s *Server) stats(w http.ResponseWriter, _ *http.Request) {
	s.hub.mu.Lock()
	tk := s.hub.last
	s.hub.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(tk)
}

// startEvents starts a server-sent event stream on w; it answers 500 and
// returns false when w cannot stream.
func startEvents(w http.ResponseWriter) (http.Flusher, bool) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	return fl, true
}
