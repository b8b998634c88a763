package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/pgadmin"
)

func (s *Server) verifyPage(w http.ResponseWriter, r *http.Request) {
	s.page(w, "verify", "Verify", map[string]any{"Prefix": r.URL.Query().Get("prefix"), "Partition": r.URL.Query().Get("partition")})
}

// verifyProgress is one progress message of a verification run.
type verifyProgress struct {
	Done   int    `json:"done"`
	Total  int    `json:"total"`
	Events uint64 `json:"events"`
	Broken int    `json:"broken"`
	// Break describes the first broken link found (empty while none).
	Break *verifyBreak `json:"break,omitempty"`
	// Finished is set on the last message; Error when the run failed.
	Finished bool   `json:"finished"`
	Error    string `json:"error,omitempty"`
}

type verifyBreak struct {
	Stream   string `json:"stream"`
	Tag      string `json:"tag"`
	Version  uint64 `json:"version"`
	Position string `json:"position"`
	Reason   string `json:"reason"`
}

// verifyRun verifies the hash chain of every stream whose tag starts with
// ?prefix (of ?partition, or every partition, the untagged chains and the
// streams whose record was removed included, as `scribe verify` does) and
// streams progress as server-sent "progress" messages, at most every 100 ms,
// the last one with finished set. The run ends when the page is closed.
func (s *Server) verifyRun(w http.ResponseWriter, r *http.Request) {
	fl, ok := startEvents(w)
	if !ok {
		return
	}
	ctx := r.Context()
	send := func(p verifyProgress) bool {
		b, _ := json.Marshal(p)
		if _, err := fmt.Fprintf(w, "event: progress\ndata: %s\n\n", b); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	partition, prefix := r.URL.Query().Get("partition"), r.URL.Query().Get("prefix")
	var streams []journal.StreamID
	q := pgadmin.StreamsQuery{Partition: partition, TagPrefix: prefix, Limit: 1000}
	for {
		page, err := s.cfg.Admin.Streams(ctx, q)
		if err != nil {
			send(verifyProgress{Finished: true, Error: err.Error()})
			return
		}
		for _, sum := range page {
			streams = append(streams, sum.Stream)
		}
		if len(page) < q.Limit {
			break
		}
		q.After = page[len(page)-1].Stream
	}
	if prefix == "" {
		unrecorded, err := s.cfg.Admin.UnrecordedStreams(ctx, partition)
		if err != nil {
			send(verifyProgress{Finished: true, Error: err.Error()})
			return
		}
		streams = append(streams, unrecorded...)
	}
	p := verifyProgress{Total: len(streams)}
	shown := time.Time{}
	for _, st := range streams {
		n, err := journal.VerifyStream(ctx, s.cfg.Journal, st)
		p.Done++
		p.Events += n
		var ce *journal.ChainError
		switch {
		case errors.As(err, &ce):
			p.Broken++
			if p.Break == nil {
				p.Break = &verifyBreak{Stream: ce.Stream.String(), Tag: string(ce.Stream.Tag), Version: ce.Version, Position: ce.Position.String(), Reason: ce.Reason}
			}
		case err != nil:
			p.Finished, p.Error = true, fmt.Sprintf("verifying %s: %v", st, err)
			send(p)
			return
		}
		if time.Since(shown) >= 100*time.Millisecond {
			shown = time.Now()
			if !send(p) {
				return
			}
		}
	}
	p.Finished = true
	send(p)
}
