package actors

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	otelx "github.com/scribe-es/scribe/internal/telemetry"

	"go.opentelemetry.io/otel/metric"

	"github.com/scribe-es/scribe/journal"
)

// A store that went back in time.
//
// An asynchronous standby promoted after a failover, or a database restored
// from a backup, can hold less than it acknowledged: the newest commits of
// some streams are gone. A stream actor caches its stream's version, state
// and idempotency keys, so on such a store it would decide on a state the
// store no longer has (every append fails with a version mismatch) and answer
// retries of lost commands as duplicates from memory. Instead:
//
//   - Whenever the store may have changed under the host (the journal's
//     ServerEpoch moved: a new server address, a lost connection; or another
//     stream of this host was found rewound), each actor re-validates before
//     it decides, grants a reservation or answers a duplicate: it reads its
//     stream's tail, and when nothing follows its cached version, the
//     stream's summary.
//   - A catch-up that finds the stream at a version below the cached one (or
//     at the same version with another chain head, or a tail that does not
//     link to the cached head) drops the cache (state, version, idempotency
//     keys) and reloads from the store, with a snapshot no newer than the
//     store's version. The commands waiting are then decided again on the
//     reloaded state: none was acknowledged.
//   - A stopped actor leaves its stream's version and head with the host (a
//     bounded memory, maxHighWater streams), so a stream reloaded after its
//     node session was lost, or after passivation, is compared as well.
//   - Each detection is logged once as an ERROR naming the lost versions and
//     both chain heads, counted (otelx.MetricRewoundStreams, otelx.MetricLostVersions),
//     summarised by Host.Rewinds, passed to Config.OnStoreRewound, and raises
//     Host.StoreEpoch, so caches of answers kept outside the host (an HTTP
//     replay cache) know to re-validate.
//
// Versions lost this way are reused by the next appends: that cannot be
// avoided (the store no longer has them), but it is never silent.

// maxHighWater bounds the streams whose last known version the host keeps
// after their actors stopped; past it the oldest are forgotten.
const maxHighWater = 100_000

// StoreRewind reports one stream found behind what this host had
// acknowledged or read: the store lost versions Found+1 … Known.
type StoreRewind struct {
	Stream journal.StreamID
	// Known is the newest version this host had acknowledged (or read) on
	// the stream; Found the stream's version in the store when the loss was
	// detected.
	Known, Found uint64
	// KnownHead is the chain hash of version Known as this host knew it,
	// FoundHead the store's head hash of the stream; zero when unknown.
	KnownHead, FoundHead journal.Hash
	// Diverged: the store's events at or below Known are not the ones this
	// host knew (their chain does not link to KnownHead), so Found may be
	// at or above Known and the lost range is not known exactly.
	Diverged bool
	// DetectedAt is when the host detected the loss.
	DetectedAt time.Time
}

// Lost returns the number of acknowledged versions the store no longer has
// (0 for a diverged stream whose store version is not below Known).
func (r StoreRewind) Lost() uint64 {
	if r.Found >= r.Known {
		return 0
	}
	return r.Known - r.Found
}

// RewindSummary sums up the store rewinds a host detected since it started.
type RewindSummary struct {
	// Streams counts detections (a stream found rewound twice counts twice);
	// LostVersions sums their Lost.
	Streams, LostVersions uint64
	// Last is the most recent detection; zero when none.
	Last StoreRewind
}

// rewinds is the host's record of detected rewinds and of the last known
// head of streams whose actors stopped.
type rewinds struct {
	epoch  atomic.Uint64 // raised with every detection (part of StoreEpoch)
	mu     sync.Mutex
	sum    RewindSummary
	marks  map[journal.StreamID]highWater
	order  []journal.StreamID // oldest first; may hold streams already taken
	watch  journal.ServerWatcher
	counts struct {
		streams, versions metric.Int64Counter
	}
}

// highWater is the newest version (and its chain hash) a host knew of a
// stream whose actor stopped.
type highWater struct {
	version uint64
	head    journal.Hash
}

func (r *rewinds) init(j journal.Journal, m metric.Meter) error {
	r.marks = map[journal.StreamID]highWater{}
	r.watch, _ = j.(journal.ServerWatcher)
	var err error
	if r.counts.streams, err = m.Int64Counter(otelx.MetricRewoundStreams, metric.WithDescription("Streams found behind what this node had acknowledged (an asynchronous standby promoted, a backup restored)."), metric.WithUnit("{stream}")); err != nil {
		return err
	}
	r.counts.versions, err = m.Int64Counter(otelx.MetricLostVersions, metric.WithDescription("Acknowledged stream versions the store no longer held when a rewind was detected."), metric.WithUnit("{version}"))
	return err
}

// StoreEpoch returns a counter that never decreases and increases whenever
// answers cached from this host may no longer match the store: the journal's
// ServerEpoch moved (journal.ServerWatcher: a new server, a lost connection)
// or a stream was found rewound. A cache of answers kept outside the host
// (an HTTP replay cache) should replay an answer only while the epoch it was
// taken under is current, and otherwise execute again: the runtime's durable
// idempotency then answers a stored command as a duplicate and decides a lost
// one again. Safe for concurrent use; no I/O.
func (h *Host) StoreEpoch() uint64 {
	e := h.rw.epoch.Load()
	if h.rw.watch != nil {
		e += h.rw.watch.ServerEpoch()
	}
	return e
}

// Rewinds returns what the host detected of stores that went back in time.
// Safe for concurrent use; no I/O.
func (h *Host) Rewinds() RewindSummary {
	h.rw.mu.Lock()
	defer h.rw.mu.Unlock()
	return h.rw.sum
}

// remember keeps the last known head of a stream whose actor stops.
func (h *Host) remember(stream journal.StreamID, hw highWater) {
	if hw.version == 0 {
		return
	}
	r := &h.rw
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.marks[stream]; ok && old.version > hw.version {
		return
	}
	if _, ok := r.marks[stream]; !ok {
		r.order = append(r.order, stream)
	}
	r.marks[stream] = hw
	for len(r.marks) > maxHighWater && len(r.order) > 0 {
		delete(r.marks, r.order[0])
		r.order = r.order[1:]
	}
	if len(r.order) > 2*maxHighWater {
		live := r.order[:0:0]
		for _, s := range r.order {
			if _, ok := r.marks[s]; ok {
				live = append(live, s)
			}
		}
		r.order = live
	}
}

// takeMark returns and forgets the last known head of stream (its new actor
// holds it from now on).
func (h *Host) takeMark(stream journal.StreamID) (highWater, bool) {
	r := &h.rw
	r.mu.Lock()
	defer r.mu.Unlock()
	hw, ok := r.marks[stream]
	delete(r.marks, stream)
	return hw, ok
}

// rewound reports one detected rewind: the ERROR log, the metrics, the
// summary, the epoch and the OnStoreRewound callback.
func (h *Host) rewound(rw StoreRewind) {
	r := &h.rw
	r.mu.Lock()
	r.sum.Streams++
	r.sum.LostVersions += rw.Lost()
	r.sum.Last = rw
	r.mu.Unlock()
	r.epoch.Add(1)
	r.counts.streams.Add(context.Background(), 1)
	r.counts.versions.Add(context.Background(), int64(rw.Lost()))
	msg := "the store lost acknowledged events of a stream (an asynchronous standby was promoted or a backup restored): dropping the stream's cached state and idempotency keys and reloading it from the store; the lost versions will be reused by new appends"
	if rw.Diverged {
		msg = "the store holds other events than this node acknowledged for a stream (its chain does not link to the head this node knew): dropping the stream's cached state and idempotency keys and reloading it from the store"
	}
	h.cfg.Logger.Error(msg, "stream", rw.Stream.String(),
		"known_version", rw.Known, "found_version", rw.Found,
		"lost_from", rw.Found+1, "lost_to", rw.Known, "lost_versions", rw.Lost(),
		"known_head", hashText(rw.KnownHead), "found_head", hashText(rw.FoundHead), "diverged", rw.Diverged)
	if f := h.cfg.OnStoreRewound; f != nil {
		f(rw)
	}
}

func hashText(h journal.Hash) string {
	if h == (journal.Hash{}) {
		return "unknown"
	}
	return h.String()
}

// headOf returns rec's chain hash in tag's stream.
func headOf(rec *journal.Record, tag journal.Tag) (journal.StreamLink, bool) {
	for _, l := range rec.Links {
		if l.Tag == tag {
			return l, true
		}
	}
	return journal.StreamLink{}, false
}

// checkStore compares what the store holds of the actor's stream (version and
// head) after a catch-up that read nothing, with what the actor knew; it
// reports a rewind when the store is behind or holds another head.
func (h *Host) checkStore(ctx context.Context, src journal.Journal, stream journal.StreamID, known uint64, head journal.Hash) (*StoreRewind, error) {
	sum, err := src.TagSummary(ctx, stream)
	if err != nil {
		return nil, err
	}
	behind := sum.Version < known
	diverged := sum.Version == known && head != (journal.Hash{}) && sum.HeadHash != (journal.Hash{}) && sum.HeadHash != head
	if !behind && !diverged {
		return nil, nil
	}
	return &StoreRewind{Stream: stream, Known: known, Found: sum.Version, KnownHead: head, FoundHead: sum.HeadHash, Diverged: diverged, DetectedAt: time.Now()}, nil
}

// onRewound reports a rewind of the actor's stream found by a catch-up; the
// actor then drops its cache (stBroken) and reloads it from the store (a
// snapshot no newer than the store's version), and the queued commands are
// decided again.
func (a *streamActor) onRewound(rw StoreRewind) {
	a.host.rewound(rw)
	// Reload from a snapshot no newer than the store's version (a snapshot
	// store kept apart from the journal may not have gone back with it), or
	// from none when the history diverged.
	a.snapCap = rw.Found + 1
	if rw.Diverged {
		a.snapCap = 1
	}
	a.dissolveOpen()
}

// revalidate marks the cache stale when the store may have changed since
// the actor last validated it (StoreEpoch moved).
func (a *streamActor) revalidate() {
	if a.epoch != a.host.StoreEpoch() {
		a.need(stStale)
	}
}
