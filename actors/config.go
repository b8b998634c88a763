package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/snapshots"
)

// DefaultBounds returns the Bounds a zero field takes: SessionTimeout 1 min,
// OpenTimeout 5 s, IdleTimeout 2 min, RequestTimeout 30 s,
// ReservationTimeout and ReservationHold 10 s, RecoveryConcurrency 64,
// MaxBatch 1000, MaxQueue 5000, MaxPending 50000, QueueDelayTarget 10 ms,
// QueueDelayInterval 100 ms, shedding on.
func DefaultBounds() Bounds {
	return Bounds{
		SessionTimeout:      time.Minute,
		OpenTimeout:         5 * time.Second,
		IdleTimeout:         2 * time.Minute,
		RequestTimeout:      30 * time.Second,
		ReservationTimeout:  10 * time.Second,
		ReservationHold:     10 * time.Second,
		RecoveryConcurrency: 64,
		MaxBatch:            1000,
		MaxQueue:            5000,
		MaxPending:          50000,
		QueueDelayTarget:    10 * time.Millisecond,
		QueueDelayInterval:  100 * time.Millisecond,
	}
}

// Bounds are the stream engine's timeouts and bounds, the one place they are
// defined (runtime.Config embeds them as runtime.Bounds). A zero field takes
// its value in DefaultBounds; a negative one is a configuration error.
type Bounds struct {
	// SessionTimeout is the node session's lifetime without renewal; it is
	// renewed every SessionTimeout/3, one call whatever the number of streams.
	SessionTimeout time.Duration
	// OpenTimeout bounds the wait for a stream whose lease another live node
	// holds; then the stream's queued commands fail with
	// journal.ErrOpenTimeout.
	OpenTimeout time.Duration
	// IdleTimeout passivates a stream actor idle this long (snapshot if due,
	// release the lease, stop).
	IdleTimeout time.Duration
	// RequestTimeout bounds a command whose context has no deadline, and
	// every journal and snapshot call of the actors.
	RequestTimeout time.Duration
	// ReservationTimeout bounds how long a DCB reservation waits for a busy
	// stream; ReservationHold how long a granted one may be held before the
	// stream's actor cancels it and re-reads its tail.
	ReservationTimeout, ReservationHold time.Duration
	// RecoveryConcurrency bounds how many streams load snapshots and replay
	// at the same time, so a cold start does not stampede the database.
	RecoveryConcurrency int
	// MaxBatch caps the commands of one group commit.
	MaxBatch int
	// MaxQueue bounds the commands and reservations waiting at one stream,
	// MaxPending those of all streams together (about 4 KB each); past either
	// a command fails at once with ErrOverloaded, undecided.
	MaxQueue, MaxPending int
	// QueueDelayTarget and QueueDelayInterval shed by queueing delay when
	// callers send no deadline (CoDel, overload.go): when every group commit
	// a stream sent for a whole interval had a command that waited longer
	// than the target, and callers gave up meanwhile, the stream refuses new
	// commands at once with ErrOverloaded beyond a cap steered to keep its
	// waits near the target, until its waits are short and nothing was
	// refused for an interval. A stream raises the target to 1.5 times its
	// fastest recent append when that is longer. The target must be shorter
	// than the interval.
	QueueDelayTarget, QueueDelayInterval time.Duration
	// DisableQueueDelayShedding turns queue-delay shedding off: commands are
	// then refused only past MaxQueue or MaxPending, or by their deadline.
	DisableQueueDelayShedding bool
}

// Config configures a Host. NewHost validates it and applies the defaults.
type Config struct {
	// Journal stores the events, Sessions grants the node session and the
	// stream leases, Resolve maps a tag group to its aggregate Model, and
	// NodeID names this node across restarts (a host opened with the NodeID
	// of a crashed one takes over its leases at once). All required.
	Journal  journal.Journal
	Sessions journal.Sessions
	Resolve  Resolver
	NodeID   string
	// Snapshots stores state snapshots (nil: none); SnapshotPolicy says when
	// they are saved, used as given (the zero Policy never snapshots).
	Snapshots      snapshots.Store
	SnapshotPolicy snapshots.Policy
	Bounds
	// OnStoreRewound, when set, is called once for every stream found
	// behind what this host had acknowledged (rewind.go), after the ERROR log
	// and before the stream serves again, on the stream actor's goroutine:
	// it must return quickly and must not call the host.
	OnStoreRewound func(StoreRewind)
	// Logger receives operational logs (default: discard); TracerProvider
	// and MeterProvider receive spans and metrics (default: no-op).
	Logger         *slog.Logger
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

func (c *Config) setDefaults() error {
	switch {
	case c.Journal == nil:
		return errors.New("actors: Config.Journal is nil; pass a journal (memory.New() or a postgres journal)")
	case c.Sessions == nil:
		return errors.New("actors: Config.Sessions is nil; pass the journal's session service")
	case c.Resolve == nil:
		return errors.New("actors: Config.Resolve is nil; pass a function mapping tag groups to aggregate models")
	case c.NodeID == "":
		return errors.New("actors: Config.NodeID is empty; give every node a stable ID")
	}
	def := DefaultBounds()
	durations := []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{
		{"SessionTimeout", &c.SessionTimeout, def.SessionTimeout},
		{"OpenTimeout", &c.OpenTimeout, def.OpenTimeout},
		{"IdleTimeout", &c.IdleTimeout, def.IdleTimeout},
		{"RequestTimeout", &c.RequestTimeout, def.RequestTimeout},
		{"ReservationTimeout", &c.ReservationTimeout, def.ReservationTimeout},
		{"ReservationHold", &c.ReservationHold, def.ReservationHold},
		{"QueueDelayTarget", &c.QueueDelayTarget, def.QueueDelayTarget},
		{"QueueDelayInterval", &c.QueueDelayInterval, def.QueueDelayInterval},
	}
	for _, d := range durations {
		if *d.d < 0 {
			return fmt.Errorf("actors: Config.%s is negative (%s); use 0 for the default (%s) or a positive duration", d.name, *d.d, d.def)
		}
		if *d.d == 0 {
			*d.d = d.def
		}
	}
	if c.QueueDelayTarget >= c.QueueDelayInterval {
		return fmt.Errorf("actors: Config.QueueDelayTarget (%s) is not shorter than Config.QueueDelayInterval (%s); give a target well below the interval (defaults %s and %s)",
			c.QueueDelayTarget, c.QueueDelayInterval, def.QueueDelayTarget, def.QueueDelayInterval)
	}
	if c.RecoveryConcurrency < 0 {
		return fmt.Errorf("actors: Config.RecoveryConcurrency is negative (%d); use 0 for the default (%d)", c.RecoveryConcurrency, def.RecoveryConcurrency)
	}
	if c.RecoveryConcurrency == 0 {
		c.RecoveryConcurrency = def.RecoveryConcurrency
	}
	if c.MaxBatch < 0 {
		return fmt.Errorf("actors: Config.MaxBatch is negative (%d); use 0 for the default (%d)", c.MaxBatch, def.MaxBatch)
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = def.MaxBatch
	}
	counts := []struct {
		name string
		n    *int
		def  int
	}{
		{"MaxQueue", &c.MaxQueue, def.MaxQueue},
		{"MaxPending", &c.MaxPending, def.MaxPending},
	}
	for _, n := range counts {
		if *n.n < 0 {
			return fmt.Errorf("actors: Config.%s is negative (%d); use 0 for the default (%d) or a positive bound", n.name, *n.n, n.def)
		}
		if *n.n == 0 {
			*n.n = n.def
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Config returns the host's configuration with defaults applied.
func (h *Host) Config() Config { return h.cfg }
