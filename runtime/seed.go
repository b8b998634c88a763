package runtime

import (
	"context"
	"errors"
	"fmt"
)

// seedCommand carries the events Seed appends: the aggregate's model returns
// them as its decision, without calling Decide.
type seedCommand struct{ events []any }

// Seed appends events (registered event values) to target's stream through
// the stream's actor as if the aggregate's Decide had returned them: the
// actor's lease fences the append, Evolve folds them into the state, the
// version advances and tags are checked as for any command. No business rule
// runs. It is meant for test fixtures (package scribetest's Given) and for
// importing history from another system; a service's own writes go through
// Execute. It refuses an empty list, and a runtime in cluster mode
// (ErrUnknownCommand): seed on a single-node runtime.
func Seed(ctx context.Context, rt *Runtime, target Target, events ...any) (Result[any], error) {
	if len(events) == 0 {
		return Result[any]{}, errors.New("runtime: Seed got no events; pass the events to append")
	}
	if rt.cluster != nil {
		return Result[any]{}, fmt.Errorf("%w: Seed runs on a single-node runtime only; seed the stream before joining a cluster", ErrUnknownCommand)
	}
	return execute[any](ctx, rt, target, seedCommand{events: events}, nil)
}
