package runtime

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
)

type rdStreet struct {
	Street string `json:"street"`
}

type rdCity struct {
	City string `json:"city"`
}

func newReadableRuntime(t *testing.T) *Runtime {
	t.Helper()
	rt, err := New(context.Background(), Config{Journal: memory.New(), NodeID: "readable"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	return rt
}

func passUpcast(to EventVersion) func(json.RawMessage) ([]Upcast, error) {
	return func(data json.RawMessage) ([]Upcast, error) {
		return []Upcast{{Type: to.Type, SchemaVersion: to.SchemaVersion, Data: data}}, nil
	}
}

// readable says which stored (type, version) pairs this build decodes: the
// registered version, every version a chain of upcasters leads from into
// readable ones, a retired version; not a version with a missing step or an
// upcaster into something unreadable.
func TestReadable(t *testing.T) {
	rt := newReadableRuntime(t)
	MustRegisterEvent[rdStreet](rt, "StreetChanged", 2)
	MustRegisterEvent[rdCity](rt, "CityChanged", 1)
	MustRegisterUpcaster(rt, "StreetChanged", 1, func(d json.RawMessage) (json.RawMessage, error) { return d, nil })
	// AddressChanged v1 was renamed AddressMoved v1, which splits into the
	// old street version (upcast further) and a city.
	MustRegisterEventUpcaster(rt, EventUpcaster{
		Type: "AddressChanged", FromVersion: 1,
		Into:   []EventVersion{{"AddressMoved", 1}},
		Upcast: passUpcast(EventVersion{"AddressMoved", 1}),
	})
	MustRegisterEventUpcaster(rt, EventUpcaster{
		Type: "AddressMoved", FromVersion: 1,
		Into:   []EventVersion{{"StreetChanged", 1}, {"CityChanged", 1}},
		Upcast: func(json.RawMessage) ([]Upcast, error) { return nil, nil },
	})
	MustRegisterEventUpcaster(rt, EventUpcaster{Type: "Noted", FromVersion: 1, Upcast: func(json.RawMessage) ([]Upcast, error) { return nil, nil }})
	MustRegisterEventUpcaster(rt, EventUpcaster{
		Type: "Broken", FromVersion: 1,
		Into:   []EventVersion{{"CityChanged", 2}},
		Upcast: passUpcast(EventVersion{"CityChanged", 2}),
	})
	r := rt.reg
	for _, c := range []struct {
		name    string
		version int
		want    bool
	}{
		{"StreetChanged", 2, true},
		{"StreetChanged", 1, true},
		{"StreetChanged", 3, false}, // newer than this build
		{"CityChanged", 1, true},
		{"CityChanged", 0, true}, // 0 reads as 1
		{"AddressMoved", 1, true},
		{"AddressChanged", 1, true},
		{"AddressChanged", 2, false},
		{"Noted", 1, true}, // retired: decodes to nothing
		{"Broken", 1, false},
		{"Unknown", 1, false},
	} {
		require.Equal(t, c.want, r.readable(c.name, c.version), "%s v%d", c.name, c.version)
	}

	// StoredQuery adds the old names of the queried types.
	q := rt.StoredQuery(journal.Query{Items: []journal.QueryItem{{Types: []string{"CityChanged"}}, {Tags: []journal.Tag{"a:1"}}}})
	require.Equal(t, []string{"CityChanged", "AddressChanged", "AddressMoved", "Broken"}, q.Items[0].Types)
	require.Empty(t, q.Items[1].Types)
}

// Upcasters are refused when they would loop, read the version this build
// writes, or duplicate another; an event registered at or below a version
// an upcaster reads is refused too.
func TestEventUpcasterRegistration(t *testing.T) {
	rt := newReadableRuntime(t)
	MustRegisterEvent[rdCity](rt, "CityChanged", 2)
	MustRegisterEventUpcaster(rt, EventUpcaster{Type: "A", FromVersion: 1, Into: []EventVersion{{"B", 1}}, Upcast: passUpcast(EventVersion{"B", 1})})
	err := RegisterEventUpcaster(rt, EventUpcaster{Type: "B", FromVersion: 1, Into: []EventVersion{{"A", 1}}, Upcast: passUpcast(EventVersion{"A", 1})})
	require.ErrorIs(t, err, ErrRegistration)
	require.ErrorContains(t, err, "makes a loop")
	err = RegisterEventUpcaster(rt, EventUpcaster{Type: "CityChanged", FromVersion: 2, Into: []EventVersion{{"B", 1}}, Upcast: passUpcast(EventVersion{"B", 1})})
	require.ErrorContains(t, err, "registered at version 2")
	err = RegisterEventUpcaster(rt, EventUpcaster{Type: "A", FromVersion: 1, Upcast: passUpcast(EventVersion{"B", 1})})
	require.ErrorContains(t, err, `event "A" already has an upcaster from version 1`)
	err = RegisterEventUpcaster(rt, EventUpcaster{Type: "C", FromVersion: 1, Into: []EventVersion{{"", 1}}, Upcast: passUpcast(EventVersion{"B", 1})})
	require.ErrorContains(t, err, "name a type and a version")
	err = RegisterEventUpcaster(rt, EventUpcaster{Type: "C", FromVersion: 1})
	require.ErrorContains(t, err, "no Upcast function")
	err = RegisterEvent[rdStreet](rt, "A", 1)
	require.ErrorContains(t, err, "an upcaster reads its version 1")
	for _, e := range []error{err} {
		require.LessOrEqual(t, len(e.Error()), 200)
	}
}
