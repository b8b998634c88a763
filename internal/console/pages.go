package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres/pgadmin"
	"github.com/scribe-es/scribe/projection"
)

// pageSize bounds the rows of a list page; the page links to the next one.
const pageSize = 100

// streamPage is how many of a stream's events one page shows.
const streamPage = 50

// newestShown is how many of the newest events the overview lists.
const newestShown = 20

// lagCountLimit bounds the count of a projection's lag in events: beyond it
// the console shows "at least" (the count reads the index up to it).
const lagCountLimit = 100_000

// recordView is a record as a page shows it: data and metadata as indented
// JSON (escaped by the template), per-tag versions in chain order.
type recordView struct {
	journal.Record
	DataJSON     string
	MetadataJSON string
	Chains       []string
}

func viewRecord(r journal.Record) recordView {
	v := recordView{Record: r, DataJSON: indent(r.Data)}
	if md, err := json.MarshalIndent(r.Metadata, "", "  "); err == nil {
		v.MetadataJSON = string(md)
	}
	for _, l := range r.Links {
		v.Chains = append(v.Chains, fmt.Sprintf("%s v%d", l.Tag, l.Version))
	}
	return v
}

// indent pretty-prints JSON data; data that is not JSON is shown as is.
func indent(data []byte) string {
	var b bytes.Buffer
	if json.Indent(&b, data, "", "  ") != nil {
		return string(data)
	}
	return b.String()
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	o, err := s.cfg.Admin.Overview(ctx)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	newest, err := s.cfg.Admin.Newest(ctx, newestShown)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	projs, err := s.projectionRows(r)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	s.page(w, "overview", "Overview", map[string]any{"Overview": o, "Newest": newest, "Projections": projs})
}

func (s *Server) streams(w http.ResponseWriter, r *http.Request) {
	q := pgadmin.StreamsQuery{Partition: r.URL.Query().Get("partition"), TagPrefix: r.URL.Query().Get("prefix"), Limit: pageSize + 1}
	if after := r.URL.Query().Get("after"); after != "" {
		q.After = journal.StreamID{Partition: r.URL.Query().Get("afterPartition"), Tag: journal.Tag(after)}.Normalize()
	}
	page, err := s.cfg.Admin.Streams(r.Context(), q)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	var next *journal.StreamID
	if len(page) > pageSize {
		page = page[:pageSize]
		next = &page[pageSize-1].Stream
	}
	s.page(w, "streams", "Streams", map[string]any{"Prefix": q.TagPrefix, "Partition": q.Partition, "Streams": page, "Next": next})
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	stream := journal.StreamID{Partition: r.URL.Query().Get("partition"), Tag: journal.Tag(r.PathValue("tag"))}.Normalize()
	sum, err := s.cfg.Journal.TagSummary(ctx, stream)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	if sum.Version == 0 {
		s.fail(w, http.StatusNotFound, fmt.Errorf("stream %s has no events; check the tag and the partition", stream))
		return
	}
	// Newest first: the page before version `before` (exclusive).
	before := sum.Version + 1
	if b, err := strconv.ParseUint(r.URL.Query().Get("before"), 10, 64); err == nil && b >= 1 && b <= sum.Version+1 {
		before = b
	}
	from := sum.Cut.Version + 1
	if before > streamPage && before-streamPage > from {
		from = before - streamPage
	}
	var recs []recordView
	if before > from {
		for rec, err := range s.cfg.Journal.ReadStream(ctx, stream, from, int(before-from)) {
			if err != nil {
				s.fail(w, http.StatusInternalServerError, err)
				return
			}
			recs = append(recs, viewRecord(rec))
		}
	}
	slices.Reverse(recs)
	older := uint64(0)
	if from > sum.Cut.Version+1 {
		older = from
	}
	s.page(w, "stream", string(stream.Tag), map[string]any{"Stream": stream, "Summary": sum, "Records": recs, "Older": older})
}

func (s *Server) event(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("%q is not an event ID (a UUID)", r.PathValue("id")))
		return
	}
	rec, err := s.cfg.Journal.ReadEvent(r.Context(), id)
	if errors.Is(err, journal.ErrNotFound) {
		s.fail(w, http.StatusNotFound, fmt.Errorf("no event with ID %s, hot or archived", id))
		return
	}
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	s.page(w, "event", "Event "+id.String(), viewRecord(rec))
}

func (s *Server) correlation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var recs []recordView
	for rec, err := range s.cfg.Journal.ReadByCorrelation(r.Context(), id) {
		if err != nil {
			s.fail(w, http.StatusInternalServerError, err)
			return
		}
		if len(recs) == pageSize*10 {
			break
		}
		recs = append(recs, viewRecord(rec))
	}
	s.page(w, "correlation", "Correlation "+id, map[string]any{"ID": id, "Records": recs})
}

func (s *Server) types(w http.ResponseWriter, r *http.Request) {
	types, err := s.cfg.Journal.TypeSummaries(r.Context())
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	s.page(w, "types", "Event types", types)
}

func (s *Server) leases(w http.ResponseWriter, r *http.Request) {
	leases, err := s.cfg.Admin.Leases(r.Context(), "")
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	nodes, err := s.cfg.Admin.Nodes(r.Context())
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	live := 0
	for _, l := range leases {
		if l.Live {
			live++
		}
	}
	s.page(w, "leases", "Leases", map[string]any{"Leases": leases, "Nodes": nodes, "Live": live, "Lapsed": len(leases) - live})
}

// projectionRow is a projection as the console shows it.
type projectionRow struct {
	projection.Status
	Lag         uint64
	LagAtLeast  bool // Lag reached lagCountLimit: there are at least that many
	LagTime     time.Duration
	DeadLetters int
	// Letters are the first deadLettersShown dead letters, oldest first.
	Letters []projection.DeadLetter
}

// deadLettersShown bounds the dead letters the projections page lists per
// projection.
const deadLettersShown = 20

func (s *Server) projectionRows(r *http.Request) ([]projectionRow, error) {
	ctx := r.Context()
	statuses, err := s.cfg.Projections.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]projectionRow, len(statuses))
	for i, st := range statuses {
		rows[i].Status = st
		if st.Slices > 0 {
			// A sliced projection: its status sums its slices up, and so
			// does its lag (each slice's events after its own checkpoint).
			lags, err := s.cfg.Admin.SliceLags(ctx, st.Key, max(1, lagCountLimit/st.Slices))
			if err != nil {
				return nil, err
			}
			total := pgadmin.TotalSliceLag(lags)
			rows[i].Lag, rows[i].LagTime, rows[i].LagAtLeast = total.Events, age(total.Oldest), total.AtLeast
		} else {
			if rows[i].Lag, err = s.cfg.Admin.CountAfterAtMost(ctx, st.Checkpoint, lagCountLimit); err != nil {
				return nil, err
			}
			rows[i].LagAtLeast = rows[i].Lag == lagCountLimit
		}
		if rows[i].Lag > 0 && st.Slices == 0 {
			for rec, err := range s.cfg.Journal.ReadAll(ctx, st.Checkpoint, 1) {
				if err != nil {
					return nil, err
				}
				rows[i].LagTime = age(rec.RecordedAt)
			}
		}
		dl, err := s.cfg.Projections.DeadLetters(ctx, st.Key)
		if err != nil {
			return nil, err
		}
		rows[i].DeadLetters = len(dl)
		rows[i].Letters = dl[:min(len(dl), deadLettersShown)]
	}
	return rows, nil
}

// age is how long ago t was, to the millisecond (0 for the zero time).
func age(t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return max(0, time.Since(t)).Round(time.Millisecond)
}

func (s *Server) projections(w http.ResponseWriter, r *http.Request) {
	rows, err := s.projectionRows(r)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	q := r.URL.Query()
	s.page(w, "projections", "Projections", map[string]any{"Projections": rows, "Done": q.Get("done"), "Replayed": q.Get("replayed"), "Letters": q.Get("letters"),
		"Paused": q.Get("paused"), "Resumed": q.Get("resumed")})
}

// rebuild resets a projection's checkpoint (the runner replays the feed).
// It needs Config.AllowActions and the form's confirmation field set to the
// projection's name.
func (s *Server) rebuild(w http.ResponseWriter, r *http.Request) {
	k, ok := s.confirmedAction(w, r, "rebuild it")
	if !ok {
		return
	}
	if err := s.cfg.Projections.Reset(r.Context(), k, nil); err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	http.Redirect(w, r, "/projections?done="+k.String(), http.StatusSeeOther)
}

// replay asks the projection's runner to replay its dead letters (as `scribe
// projections dead-letters replay` does). It needs Config.AllowActions and the
// form's confirmation field set to the projection's name.
func (s *Server) replay(w http.ResponseWriter, r *http.Request) {
	k, ok := s.confirmedAction(w, r, "replay its dead letters")
	if !ok {
		return
	}
	n, err := s.cfg.Projections.RequestReplay(r.Context(), k)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	http.Redirect(w, r, "/projections?replayed="+k.String()+"&letters="+strconv.Itoa(n), http.StatusSeeOther)
}

// pause pauses (or, with resume, resumes) a projection as `scribe
// projections pause|resume` does, behind the same confirmation.
func (s *Server) pause(resume bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		what, do := "pause it", s.cfg.Projections.Pause
		if resume {
			what, do = "resume it", s.cfg.Projections.Resume
		}
		k, ok := s.confirmedAction(w, r, what)
		if !ok {
			return
		}
		if err := do(r.Context(), k); err != nil {
			s.fail(w, http.StatusInternalServerError, err)
			return
		}
		verb := "paused"
		if resume {
			verb = "resumed"
		}
		http.Redirect(w, r, "/projections?"+verb+"="+k.String(), http.StatusSeeOther)
	}
}

// confirmedAction checks that actions are enabled and that the form names a
// projection and confirms it by its name; it answers the error itself.
func (s *Server) confirmedAction(w http.ResponseWriter, r *http.Request, what string) (projection.Key, bool) {
	if !s.cfg.AllowActions {
		s.fail(w, http.StatusForbidden, fmt.Errorf("the console is read-only; start it with -allow-actions to %s", what))
		return projection.Key{}, false
	}
	if err := r.ParseForm(); err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return projection.Key{}, false
	}
	version, _ := strconv.Atoi(r.PostForm.Get("version"))
	k := projection.Key{Name: r.PostForm.Get("name"), Version: version}
	if err := k.Validate(); err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return projection.Key{}, false
	}
	if r.PostForm.Get("confirm") != k.Name {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("type the projection's name (%s) in the confirmation field to %s", k.Name, what))
		return projection.Key{}, false
	}
	return k, true
}
