package partitioned

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/scribe-es/scribe/journal"
)

// Member is one database of a partitioned journal.
type Member struct {
	// Name identifies the member in the partition map and in errors, the
	// same on every node (for example "eu-1"). Required, unique.
	Name string
	// Journal is the member's journal. Required.
	Journal journal.Journal
	// Sessions grants the member's leases. Default: Journal, when it
	// implements journal.Sessions (the Postgres and memory journals do).
	Sessions journal.Sessions
}

// Config configures a Router.
type Config struct {
	// Members are the databases, in the order ReadEvent and
	// ReadByCorrelation ask them. At least one.
	Members []Member
	// Partitions maps a partition to the Name of the member serving it.
	// An empty partition key means journal.DefaultPartition. Partitions not
	// in the map are served by Default.
	Partitions map[string]string
	// Default names the member serving partitions absent from Partitions.
	// Default "": such partitions fail with ErrUnknownPartition (every
	// partition must then be mapped); with a single member, that member.
	Default string
}

// Router is a journal spread over several member databases by partition.
// It implements journal.Journal, journal.Sessions, journal.Limited,
// journal.ServerWatcher and journal.ArchiveReader. Safe for concurrent use.
type Router struct {
	members map[string]*member
	order   []*member // Config.Members' order

	mu       sync.RWMutex
	routes   map[string]*member // partition → member
	fallback *member            // nil: unmapped partitions fail

	nodes nodeTable
}

type member struct {
	Member
	index int
}

var (
	_ journal.Journal       = (*Router)(nil)
	_ journal.Sessions      = (*Router)(nil)
	_ journal.Limited       = (*Router)(nil)
	_ journal.ServerWatcher = (*Router)(nil)
	_ journal.ArchiveReader = (*Router)(nil)
)

// New validates cfg and returns its Router. It does no I/O.
func New(cfg Config) (*Router, error) {
	if len(cfg.Members) == 0 {
		return nil, fmt.Errorf("%w: partitioned: Config.Members is empty; give one Member per database", journal.ErrConfiguration)
	}
	r := &Router{members: make(map[string]*member), routes: make(map[string]*member)}
	for i, m := range cfg.Members {
		switch {
		case m.Name == "":
			return nil, fmt.Errorf("%w: partitioned: Config.Members[%d] has no Name; name every member (the same on every node)", journal.ErrConfiguration, i)
		case m.Journal == nil:
			return nil, fmt.Errorf("%w: partitioned: member %q has no Journal", journal.ErrConfiguration, m.Name)
		case r.members[m.Name] != nil:
			return nil, fmt.Errorf("%w: partitioned: two members are named %q; names must be unique", journal.ErrConfiguration, m.Name)
		}
		if m.Sessions == nil {
			s, ok := m.Journal.(journal.Sessions)
			if !ok {
				return nil, fmt.Errorf("%w: partitioned: member %q has no Sessions and its journal (%T) does not implement journal.Sessions", journal.ErrConfiguration, m.Name, m.Journal)
			}
			m.Sessions = s
		}
		mm := &member{Member: m, index: i}
		r.members[m.Name] = mm
		r.order = append(r.order, mm)
	}
	for p, name := range cfg.Partitions {
		m := r.members[name]
		if m == nil {
			return nil, fmt.Errorf("%w: partitioned: partition %q maps to member %q, which is not in Config.Members (%s)", journal.ErrConfiguration, partitionName(p), name, r.names())
		}
		r.routes[partitionName(p)] = m
	}
	switch {
	case cfg.Default != "":
		if r.fallback = r.members[cfg.Default]; r.fallback == nil {
			return nil, fmt.Errorf("%w: partitioned: Config.Default names member %q, which is not in Config.Members (%s)", journal.ErrConfiguration, cfg.Default, r.names())
		}
	case len(r.order) == 1:
		r.fallback = r.order[0]
	}
	r.nodes.init()
	return r, nil
}

func partitionName(p string) string {
	if p == "" {
		return journal.DefaultPartition
	}
	return p
}

func (r *Router) names() string {
	out := make([]string, len(r.order))
	for i, m := range r.order {
		out[i] = m.Name
	}
	return strings.Join(out, ", ")
}

// Members returns the members, in Config.Members' order (Sessions filled in).
// Run per-database feeds and projections on their journals.
func (r *Router) Members() []Member {
	out := make([]Member, len(r.order))
	for i, m := range r.order {
		out[i] = m.Member
	}
	return out
}

// Member returns the member named name, and false when there is none.
func (r *Router) Member(name string) (Member, bool) {
	m, ok := r.members[name]
	if !ok {
		return Member{}, false
	}
	return m.Member, true
}

// MemberOf returns the name of the member serving partition now ("" means
// journal.DefaultPartition), or an error matching ErrUnknownPartition.
func (r *Router) MemberOf(partition string) (string, error) {
	m, err := r.route(partition)
	if err != nil {
		return "", err
	}
	return m.Name, nil
}

// Partitions returns the partition map as it is now (explicitly mapped
// partitions only), sorted by partition.
func (r *Router) Partitions() map[string]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]string, len(r.routes))
	for p, m := range r.routes {
		out[p] = m.Name
	}
	return out
}

// SetPartition makes the member named to serve partition from now on. Calls
// already routed keep their member; a stream of the partition whose actor
// holds a lease in the old member loses it at its next append (the move
// fences it), and its next activation acquires in the new one. It fails
// with ErrUnknownMember when no member is named to.
func (r *Router) SetPartition(partition, to string) error {
	m := r.members[to]
	if m == nil {
		return fmt.Errorf("%w: partitioned: SetPartition(%q, %q): no member is named %q (members: %s)", ErrUnknownMember, partitionName(partition), to, to, r.names())
	}
	r.mu.Lock()
	r.routes[partitionName(partition)] = m
	r.mu.Unlock()
	return nil
}

// route returns the member serving partition.
func (r *Router) route(partition string) (*member, error) {
	p := partitionName(partition)
	r.mu.RLock()
	m, ok := r.routes[p]
	fb := r.fallback
	r.mu.RUnlock()
	if ok {
		return m, nil
	}
	if fb != nil {
		return fb, nil
	}
	mapped := slices.Sorted(func(yield func(string) bool) {
		for p := range r.Partitions() {
			if !yield(p) {
				return
			}
		}
	})
	return nil, fmt.Errorf("%w: partitioned: partition %q is not in the partition map (mapped: %s) and Config.Default is empty; map it to a member or set a Default", ErrUnknownPartition, p, strings.Join(mapped, ", "))
}

// single returns the only member, or nil when there are several: a router
// with one member forwards the global feed unchanged.
func (r *Router) single() *member {
	if len(r.order) == 1 {
		return r.order[0]
	}
	return nil
}

// perDatabase is the error of a global-feed method on several members.
func (r *Router) perDatabase(method string) error {
	names := make([]string, len(r.order))
	for i, m := range r.order {
		names[i] = m.Name
	}
	sort.Strings(names)
	return &PerDatabaseError{Method: method, Members: names}
}

// Sentinel errors of the router; match them with errors.Is.
var (
	// ErrCrossPartition: one append named two partitions (its events',
	// leases' or condition's). Nothing was written; a DCB command must read
	// and write one partition. Not retryable.
	ErrCrossPartition = errors.New("partitioned: an append spans partitions")
	// ErrPerDatabase: a global-feed call (positions across partitions) on a
	// router with several members, whose positions are ordered per database
	// only. Read each member's journal instead. Not retryable.
	ErrPerDatabase = errors.New("partitioned: the global feed is per database")
	// ErrUnknownPartition: a partition that is not in the map, with no
	// Config.Default. Not retryable: fix the configuration.
	ErrUnknownPartition = errors.New("partitioned: partition not mapped")
	// ErrUnknownMember: a member name that is not in Config.Members.
	ErrUnknownMember = errors.New("partitioned: unknown member")
)

// PerDatabaseError details ErrPerDatabase: which call, and the members to
// read instead.
type PerDatabaseError struct {
	Method  string
	Members []string
}

func (e *PerDatabaseError) Error() string {
	return fmt.Sprintf("partitioned: %s orders positions across databases (members %s), which only order their own: call it on each member (Router.Member(name).Journal), or read all with a partitioned feed",
		e.Method, strings.Join(e.Members, ", "))
}

// Is matches ErrPerDatabase.
func (e *PerDatabaseError) Is(target error) bool { return target == ErrPerDatabase }
