package runtime_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/runtime"
)

// The types tests run on both stores.
func typesEnvs() map[string]func(t *testing.T) *env {
	return map[string]func(t *testing.T) *env{
		"memory":   func(*testing.T) *env { return memoryEnv() },
		"postgres": postgresEnv,
	}
}

// Payment is an event whose explicit schema says more than its Go type.
type Payment struct {
	Account string `json:"account,omitempty"`
	Amount  int    `json:"amount"`
}

// PaymentOtherBuild is the payment as another build's code writes it,
// under the same name, version and schema: its account field is misnamed.
type PaymentOtherBuild struct {
	Acct   string `json:"acct"`
	Amount int    `json:"amount"`
}

const paymentSchema = `{"type":"object","required":["account","amount"],
	"properties":{"account":{"type":"string","minLength":1},"amount":{"type":"integer","minimum":0}}}`

// payments is an aggregate appending whatever event its command is.
func payments() runtime.Aggregate[int] {
	return runtime.Aggregate[int]{
		Name:    "payments",
		Initial: func() int { return 0 },
		Decide:  func(_ int, cmd any) ([]any, error) { return []any{cmd}, nil },
		Evolve:  func(n int, _ any) int { return n + 1 },
	}
}

func newRuntime(t *testing.T, e *env, node string, mutate ...func(*runtime.Config)) *runtime.Runtime {
	t.Helper()
	cfg := runtime.Config{Journal: e.j, Sessions: e.s, NodeID: node}
	for _, m := range mutate {
		m(&cfg)
	}
	rt, err := runtime.New(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})
	return rt
}

// Start records the build's types and schemas; the registry survives a
// restart; a build registering another shape under a recorded type version
// does not start, and is told to bump the version.
func TestTypesRecordedAndConflict(t *testing.T) {
	t.Parallel()
	for name, newEnv := range typesEnvs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := t.Context()
			build := func(node string) *runtime.Runtime {
				rt := newRuntime(t, e, node)
				runtime.MustRegisterEvent[Incremented](rt, "Incremented", 1)
				runtime.MustRegisterEvent[Payment](rt, "Payment", 2, runtime.WithSchema(json.RawMessage(paymentSchema)))
				runtime.MustRegisterUpcaster(rt, "Payment", 1, func(d json.RawMessage) (json.RawMessage, error) { return d, nil })
				return rt
			}
			first := build("node-1")
			require.NoError(t, first.Start(ctx))
			tr := e.j.(journal.TypeRegistry)
			got, err := tr.RecordedTypes(ctx)
			require.NoError(t, err)
			require.Len(t, got.Schemas, 2)
			require.Equal(t, journal.TypeVersion{Type: "Incremented", Version: 1}, got.Schemas[0].TypeVersion)
			require.Contains(t, string(got.Schemas[0].Schema), `"by"`, "derived from the Go type")
			require.Equal(t, journal.TypeVersion{Type: "Payment", Version: 2}, got.Schemas[1].TypeVersion)
			require.True(t, journal.SameSchema(json.RawMessage(paymentSchema), got.Schemas[1].Schema))
			require.Len(t, got.Builds, 1)
			require.Equal(t, first.BuildID(), got.Builds[0].Build)
			require.Equal(t, "node-1", got.Builds[0].Node)
			require.Equal(t, []journal.TypeVersion{{Type: "Incremented", Version: 1}, {Type: "Payment", Version: 1}, {Type: "Payment", Version: 2}}, got.Builds[0].Reads)
			require.NoError(t, first.Start(ctx), "again")

			// A restart of the same build: same ID, same registry.
			require.NoError(t, first.Shutdown(ctx))
			second := build("node-2")
			require.Equal(t, first.BuildID(), second.BuildID())
			require.NoError(t, second.Start(ctx))
			again, err := tr.RecordedTypes(ctx)
			require.NoError(t, err)
			require.Len(t, again.Schemas, 2)
			require.Equal(t, got.Schemas[1].RecordedAt, again.Schemas[1].RecordedAt)
			require.Len(t, again.Builds, 1)
			require.Equal(t, "node-2", again.Builds[0].Node)

			// Another shape at a recorded version.
			other := newRuntime(t, e, "node-3")
			runtime.MustRegisterEvent[Incremented](other, "Incremented", 1)
			runtime.MustRegisterEvent[Payment](other, "Payment", 2, runtime.WithSchema(json.RawMessage(`{"type":"object"}`)))
			runtime.MustRegisterUpcaster(other, "Payment", 1, func(d json.RawMessage) (json.RawMessage, error) { return d, nil })
			require.NotEqual(t, first.BuildID(), other.BuildID())
			err = other.Start(ctx)
			require.ErrorIs(t, err, runtime.ErrConfiguration)
			require.ErrorIs(t, err, journal.ErrTypeConflict)
			require.Contains(t, err.Error(), `"Payment" version 2`)
			require.Contains(t, err.Error(), "version 3")
			require.Less(t, len(err.Error()), 300)
			after, err := tr.RecordedTypes(ctx)
			require.NoError(t, err)
			require.Len(t, after.Builds, 1, "the refused build is not recorded")

			// The same shape under a new version is fine.
			bumped := newRuntime(t, e, "node-4")
			runtime.MustRegisterEvent[Incremented](bumped, "Incremented", 1)
			runtime.MustRegisterEvent[Payment](bumped, "Payment", 3, runtime.WithSchema(json.RawMessage(`{"type":"object"}`)))
			for from := 1; from <= 2; from++ {
				runtime.MustRegisterUpcaster(bumped, "Payment", from, func(d json.RawMessage) (json.RawMessage, error) { return d, nil })
			}
			require.NoError(t, bumped.Start(ctx))
		})
	}
}

// An append breaking its type's explicit schema is refused, naming the
// field, on both stores; so is the payload of another build whose Go type
// does not write the schema's shape; nothing is appended.
func TestTypesSchemaViolation(t *testing.T) {
	t.Parallel()
	for name, newEnv := range typesEnvs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := t.Context()
			rt := newRuntime(t, e, "node-1")
			runtime.MustRegisterEvent[Payment](rt, "Payment", 1, runtime.WithSchema(json.RawMessage(paymentSchema)))
			runtime.MustRegisterAggregate(rt, payments())
			require.NoError(t, rt.Start(ctx))
			target := runtime.Target{Aggregate: "payments", ID: "p1"}

			_, err := rt.Execute(ctx, target, Payment{Account: "a1", Amount: 5})
			require.NoError(t, err)
			refused := func(cmd any, field string) {
				t.Helper()
				_, err := rt.Execute(ctx, target, cmd)
				require.ErrorIs(t, err, journal.ErrInvalidEvent)
				var v *runtime.SchemaViolationError
				require.ErrorAs(t, err, &v)
				require.Equal(t, "Payment", v.Type)
				require.Equal(t, field, v.Field)
				require.Contains(t, err.Error(), field)
				require.Less(t, len(v.Error()), 200, v.Error())
			}
			refused(Payment{Account: "a1", Amount: -1}, "/amount")
			refused(Payment{Amount: 3}, "/account")
			sum, err := e.j.TagSummary(ctx, target.Stream())
			require.NoError(t, err)
			require.EqualValues(t, 1, sum.Version, "nothing appended after the first")

			// Another build: same name, version and schema, but its Go type
			// writes "acct" where the schema requires "account".
			require.NoError(t, rt.Shutdown(ctx))
			other := newRuntime(t, e, "node-2")
			runtime.MustRegisterEvent[PaymentOtherBuild](other, "Payment", 1, runtime.WithSchema(json.RawMessage(paymentSchema)))
			runtime.MustRegisterAggregate(other, payments())
			require.NoError(t, other.Start(ctx), "the same schema: no conflict")
			_, err = other.Execute(ctx, target, PaymentOtherBuild{Acct: "a1", Amount: 1})
			var v *runtime.SchemaViolationError
			require.ErrorAs(t, err, &v)
			require.Equal(t, "/account", v.Field)
			sum, err = e.j.TagSummary(ctx, target.Stream())
			require.NoError(t, err)
			require.EqualValues(t, 1, sum.Version)
		})
	}
}

// An explicit schema that is no JSON Schema fails Start and the type's
// appends with ErrRegistration.
func TestTypesInvalidSchema(t *testing.T) {
	t.Parallel()
	e := memoryEnv()
	rt := newRuntime(t, e, "node-1")
	runtime.MustRegisterEvent[Payment](rt, "Payment", 1, runtime.WithSchema(json.RawMessage(`{"type":"no-such-type"}`)))
	runtime.MustRegisterAggregate(rt, payments())
	err := rt.Start(t.Context())
	require.ErrorIs(t, err, runtime.ErrRegistration)
	require.Contains(t, err.Error(), `"Payment"`)
	_, err = rt.Execute(t.Context(), runtime.Target{Aggregate: "payments", ID: "p1"}, Payment{Account: "a", Amount: 1})
	require.ErrorIs(t, err, runtime.ErrRegistration)
}

// A runtime does not start on a journal holding a type version it cannot
// read, unless told to tolerate it; an upcaster from that version makes it
// readable.
func TestTypesUnreadableVersion(t *testing.T) {
	t.Parallel()
	for name, newEnv := range typesEnvs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := t.Context()
			stored := func(typ string, v int) {
				ev := journal.Event{ID: journal.NewEventID(), Type: typ, SchemaVersion: v, Tags: []journal.Tag{"counter:old"}, Data: json.RawMessage(`{"by":1}`)}
				_, err := e.j.Append(ctx, []journal.Event{ev}, journal.AppendOptions{})
				require.NoError(t, err)
			}
			stored("Incremented", 1)
			stored("Incremented", 2)
			stored("scribe.erasure", 1) // Scribe's own records are not the build's to read

			build := func(upcast bool, mutate ...func(*runtime.Config)) *runtime.Runtime {
				rt := newRuntime(t, e, "node-1", mutate...)
				runtime.MustRegisterEvent[Incremented](rt, "Incremented", 3)
				runtime.MustRegisterUpcaster(rt, "Incremented", 2, func(d json.RawMessage) (json.RawMessage, error) { return d, nil })
				if upcast {
					runtime.MustRegisterUpcaster(rt, "Incremented", 1, func(d json.RawMessage) (json.RawMessage, error) { return d, nil })
				}
				return rt
			}
			rt := build(false)
			err := rt.Start(ctx)
			require.ErrorIs(t, err, runtime.ErrConfiguration)
			require.Contains(t, err.Error(), "Incremented v1")
			require.NotContains(t, err.Error(), "Incremented v2")
			require.NotContains(t, err.Error(), "scribe.")
			require.Less(t, len(err.Error()), 200)
			got, err := e.j.(journal.TypeRegistry).RecordedTypes(ctx)
			require.NoError(t, err)
			require.Empty(t, got.Schemas, "a refused start records nothing")
			require.NoError(t, rt.Shutdown(ctx))

			tolerant := build(false, func(c *runtime.Config) { c.TolerateUnreadableTypes = true })
			require.NoError(t, tolerant.Start(ctx))
			got, err = e.j.(journal.TypeRegistry).RecordedTypes(ctx)
			require.NoError(t, err)
			require.Len(t, got.Builds, 1)
			require.NotContains(t, got.Builds[0].Reads, journal.TypeVersion{Type: "Incremented", Version: 1}, "recorded as unreadable by this build")
			require.NoError(t, tolerant.Shutdown(ctx))

			fixed := build(true)
			require.NoError(t, fixed.Start(ctx))
		})
	}
}
