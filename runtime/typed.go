package runtime

import (
	"context"
	"fmt"
	"reflect"
)

// AggregateOf defines an aggregate whose commands have type C, checked at
// compile time: make C an interface that only the aggregate's commands
// implement (a marker method), and sending another aggregate's command to
// it does not compile. Everything else is as in Aggregate.
//
//	type AccountCommand interface{ accountCommand() }
//	func (Deposit) accountCommand() {}
//	accounts := runtime.MustRegisterAggregateOf(rt, runtime.AggregateOf[Account, AccountCommand]{Name: "account", …})
//	res, err := accounts.Execute(ctx, "42", Deposit{Amount: 100}) // res.State is an Account
type AggregateOf[S, C any] struct {
	Name          string
	Initial       func() S
	Decide        func(state S, command C) ([]any, error)
	Evolve        func(state S, event any) S
	SchemaVersion int
}

// Commands is a registered AggregateOf: the typed way to run its commands
// and read its state. Safe for concurrent use.
type Commands[S, C any] struct {
	rt   *Runtime
	name string
}

// RegisterAggregateOf registers a as RegisterAggregate does and returns its
// typed handle. A command reaching the aggregate by the untyped paths
// (Runtime.Execute, the cluster wire) that is not a C is refused with an
// error matching ErrUnknownCommand, before anything is decided.
func RegisterAggregateOf[S, C any](rt *Runtime, a AggregateOf[S, C]) (*Commands[S, C], error) {
	if a.Decide == nil {
		return nil, regErr("aggregate %q: Initial, Decide and Evolve are all required", a.Name)
	}
	decide := a.Decide
	name := a.Name
	err := RegisterAggregate(rt, Aggregate[S]{
		Name:    a.Name,
		Initial: a.Initial,
		Decide: func(state S, command any) ([]any, error) {
			c, ok := command.(C)
			if !ok {
				return nil, fmt.Errorf("%w: aggregate %q takes commands of type %s, not %T", ErrUnknownCommand, name, reflect.TypeFor[C](), command)
			}
			return decide(state, c)
		},
		Evolve:        a.Evolve,
		SchemaVersion: a.SchemaVersion,
	})
	if err != nil {
		return nil, err
	}
	return &Commands[S, C]{rt: rt, name: a.Name}, nil
}

// MustRegisterAggregateOf is RegisterAggregateOf that panics on error, for
// a service's setup.
func MustRegisterAggregateOf[S, C any](rt *Runtime, a AggregateOf[S, C]) *Commands[S, C] {
	c, err := RegisterAggregateOf(rt, a)
	if err != nil {
		panic(err)
	}
	return c
}

// Name is the aggregate's name (its streams' tag group).
func (c *Commands[S, C]) Name() string { return c.name }

// Target names the aggregate's stream with id in the default partition.
func (c *Commands[S, C]) Target(id string) Target { return Target{Aggregate: c.name, ID: id} }

// Execute runs command on the aggregate's stream id (default partition),
// with every guarantee of Runtime.Execute.
func (c *Commands[S, C]) Execute(ctx context.Context, id string, command C, opts ...ExecuteOption) (Result[S], error) {
	return execute[S](ctx, c.rt, c.Target(id), command, opts)
}

// ExecuteIn is Execute on the stream id of partition.
func (c *Commands[S, C]) ExecuteIn(ctx context.Context, partition, id string, command C, opts ...ExecuteOption) (Result[S], error) {
	return execute[S](ctx, c.rt, Target{Aggregate: c.name, ID: id, Partition: partition}, command, opts)
}

// State reads the state of stream id as State does.
func (c *Commands[S, C]) State(ctx context.Context, id string, opts ...StateOption) (StateResult[S], error) {
	return State[S](ctx, c.rt, c.Target(id), opts...)
}
