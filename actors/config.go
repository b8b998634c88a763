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

// Defaults of Config.
const (
	DefaultSessionTimeout      = time.Minute
	DefaultOpenTimeout         = 5 * time.Second
	DefaultIdleTimeout         = 2 * time.Minute
	DefaultRequestTimeout      = 30 * time.Second
	DefaultReservationTimeout  = 10 * time.Second
	DefaultReservationHold     = 10 * time.Second
	DefaultRecoveryConcurrency = 64
	DefaultMaxBatch            = 1000
	DefaultMaxQueue            = 5000
	DefaultMaxPending          = 50000
	DefaultQueueDelayTarget    = 10 * time.Millisecond
	DefaultQueueDelayInterval  = 100 * time.Millisecond
)

// Config configures a Host. Zero durations and counts take the documented
// defaults; NewHost validates the rest.
type Config struct {
	// Journal stores the events. Required.
	Journal journal.Journal
	// Sessions grants the node session and stream leases. Required.
	Sessions journal.Sessions
	// Snapshots stores state snapshots; nil disables snapshots.
	Snapshots snapshots.Store
	// SnapshotPolicy says when snapshots are saved; used as given (the zero
	// Policy never snapshots).
	SnapshotPolicy snapshots.Policy
	// Resolve maps a stream's tag group to its aggregate Model. Required.
	Resolve Resolver
	// NodeID identifies this node across restarts. Required. A host opened
	// with the NodeID of a crashed one takes over its leases at once.
	NodeID string
	// SessionTimeout is the node session's lifetime without renewal; the host
	// renews it every SessionTimeout/3. Default DefaultSessionTimeout (1 min).
	SessionTimeout time.Duration
	// OpenTimeout bounds the wait for a stream lease held by another live
	// node. Default DefaultOpenTimeout (5 s).
	OpenTimeout time.Duration
	// IdleTimeout passivates an actor that received nothing for this long.
	// Default DefaultIdleTimeout (2 min).
	IdleTimeout time.Duration
	// RequestTimeout bounds every journal and snapshot call an actor makes.
	// Default DefaultRequestTimeout (30 s).
	RequestTimeout time.Duration
	// ReservationTimeout bounds how long Reserve waits for a busy stream.
	// Default DefaultReservationTimeout (10 s).
	ReservationTimeout time.Duration
	// ReservationHold bounds how long a granted reservation may be held; the
	// actor then cancels it and re-reads its tail from the journal. Default
	// DefaultReservationHold (10 s).
	ReservationHold time.Duration
	// RecoveryConcurrency bounds how many actors of this host load snapshots
	// and replay at the same time. Default DefaultRecoveryConcurrency (64).
	RecoveryConcurrency int
	// MaxBatch caps the commands decided and appended in one journal call.
	// Default DefaultMaxBatch (1000).
	MaxBatch int
	// MaxQueue bounds the commands and reservations waiting at one stream's
	// actor; past it Execute and Reserve fail at once with ErrOverloaded.
	// Default DefaultMaxQueue (5000).
	MaxQueue int
	// MaxPending bounds the commands and reservations waiting at all actors
	// of the host together; past it Execute and Reserve fail at once with
	// ErrOverloaded. Default DefaultMaxPending (50000): about 4 KB each with
	// their callers' contexts, so at most some 200 MB.
	MaxPending int
	// OnStoreRewound, when set, is called once for every stream found
	// behind what this host had acknowledged (rewind.go: an asynchronous
	// standby promoted, a backup restored), after the ERROR log and before
	// the stream serves again. It runs on the stream actor's goroutine: it
	// must return quickly and must not call the host. Default: nil.
	OnStoreRewound func(StoreRewind)
	// QueueDelayTarget and QueueDelayInterval shed a stream's commands by
	// queueing delay, whatever their callers' deadlines (CoDel, see
	// overload.go): when every batch the stream sent for a whole
	// QueueDelayInterval had a command that waited longer than
	// QueueDelayTarget before its append started, and callers gave up
	// waiting during that interval, the stream refuses new
	// commands at once with ErrOverloaded, undecided, whenever it already
	// holds a cap of waiting commands, steered so its batches' oldest
	// commands wait about the target; it accepts every command again once a
	// batch's oldest command waited less than the target and nothing was
	// refused for an interval. The stream raises the target to 1.5 times its
	// fastest recent append when that is longer (a distant or busy
	// database). Defaults DefaultQueueDelayTarget (10 ms) and
	// DefaultQueueDelayInterval (100 ms); the target must be shorter than
	// the interval.
	QueueDelayTarget   time.Duration
	QueueDelayInterval time.Duration
	// DisableQueueDelayShedding turns queue-delay shedding off: commands are
	// then refused only past MaxQueue or MaxPending, or by their deadline.
	// Default false.
	DisableQueueDelayShedding bool
	// Logger receives operational logs. Default: discard.
	Logger *slog.Logger
	// TracerProvider and MeterProvider receive spans and metrics. Default: no-op.
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
	durations := []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{
		{"SessionTimeout", &c.SessionTimeout, DefaultSessionTimeout},
		{"OpenTimeout", &c.OpenTimeout, DefaultOpenTimeout},
		{"IdleTimeout", &c.IdleTimeout, DefaultIdleTimeout},
		{"RequestTimeout", &c.RequestTimeout, DefaultRequestTimeout},
		{"ReservationTimeout", &c.ReservationTimeout, DefaultReservationTimeout},
		{"ReservationHold", &c.ReservationHold, DefaultReservationHold},
		{"QueueDelayTarget", &c.QueueDelayTarget, DefaultQueueDelayTarget},
		{"QueueDelayInterval", &c.QueueDelayInterval, DefaultQueueDelayInterval},
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
		return fmt.Errorf("actors: Config.QueueDelayTarget (%s) is not shorter than Config.QueueDelayInterval (%s); the target is a queueing delay tolerated, the interval how long it must persist before shedding: give a target well below the interval (defaults %s and %s)",
			c.QueueDelayTarget, c.QueueDelayInterval, DefaultQueueDelayTarget, DefaultQueueDelayInterval)
	}
	if c.RecoveryConcurrency < 0 {
		return fmt.Errorf("actors: Config.RecoveryConcurrency is negative (%d); use 0 for the default (%d)", c.RecoveryConcurrency, DefaultRecoveryConcurrency)
	}
	if c.RecoveryConcurrency == 0 {
		c.RecoveryConcurrency = DefaultRecoveryConcurrency
	}
	if c.MaxBatch < 0 {
		return fmt.Errorf("actors: Config.MaxBatch is negative (%d); use 0 for the default (%d)", c.MaxBatch, DefaultMaxBatch)
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	counts := []struct {
		name string
		n    *int
		def  int
	}{
		{"MaxQueue", &c.MaxQueue, DefaultMaxQueue},
		{"MaxPending", &c.MaxPending, DefaultMaxPending},
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
