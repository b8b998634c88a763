package runtime

import (
	"fmt"

	"github.com/scribe-es/scribe/journal"
)

// checkDCBQuery checks, at registration, the query that the definition
// named command gives for the zero command: every event type it names must
// be registered, and with Uses (aggs) its items must name streams of the
// used aggregates. The types of a query rarely depend on the command; those
// that do, and a Query that panics on the zero command (it is then not
// checked here), are checked by Execute, which checks every query.
func checkDCBQuery[C any](rt *Runtime, command string, query func(C) journal.Query, aggs *dcbAggregates) error {
	q, ok := zeroQuery(query)
	if !ok {
		return nil
	}
	if i, typ, found := rt.unregisteredType(q); found {
		return regErr("DCB command %q: query item %d names event type %q, which is not registered; fix the name or call runtime.RegisterEvent for it before RegisterDCB", command, i, typ)
	}
	if aggs != nil {
		if err := aggs.checkQuery(command, q); err != nil {
			return fmt.Errorf("%w: %w", ErrRegistration, err)
		}
	}
	return nil
}

// zeroQuery returns query's answer for the zero command, false when it
// panicked.
func zeroQuery[C any](query func(C) journal.Query) (q journal.Query, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	var zero C
	return query(zero), true
}

// checkQueryTypes returns an error naming the first event type of q that is
// not registered (matching ErrInvalidCommand and ErrUnknownEvent): such a
// type matches no event this runtime can decode, so the command would
// decide from its initial state without a word.
func (rt *Runtime) checkQueryTypes(command string, q journal.Query) error {
	if i, typ, ok := rt.unregisteredType(q); ok {
		return fmt.Errorf("%w: %w: DCB command %q: query item %d names event type %q, which is not registered; fix the name or call runtime.RegisterEvent for it first", ErrInvalidCommand, ErrUnknownEvent, command, i, typ)
	}
	return nil
}

// unregisteredType returns the first event type of q that is not
// registered, with its item's index.
func (rt *Runtime) unregisteredType(q journal.Query) (item int, typ string, found bool) {
	r := rt.reg
	r.mu.RLock()
	defer r.mu.RUnlock()
	for i, it := range q.Items {
		for _, t := range it.Types {
			if r.byName[t] == nil {
				return i, t, true
			}
		}
	}
	return 0, "", false
}
