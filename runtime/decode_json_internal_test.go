package runtime

import (
	"encoding/json"
	"reflect"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

type jsonDecodeEvent struct {
	By    int               `json:"by"`
	Note  string            `json:"note"`
	Items []string          `json:"items"`
	Attrs map[string]string `json:"attrs"`
}

// jsonDecoders gives json.Unmarshal's value and error for every input, the
// reused decoders staying right after inputs they refuse.
func TestJSONDecodersMatchUnmarshal(t *testing.T) {
	inputs := []string{
		`{"by":1}`,
		`{"by":2,"note":"x","items":["a","b"],"attrs":{"k":"v"}}`,
		` {"by":3} `,
		"{\"by\":4}\n\t",
		`{"by":5}{"by":6}`, // a second value: Unmarshal refuses
		`{"by":7} x`,       // trailing garbage
		`{"by":"eight"}`,   // a type error: Unmarshal decodes the rest and reports it
		`{"by":9,"note":1,"items":["c"]}`,
		`{"by":10`, // cut short
		``,
		`   `,
		`null`,
		`[1,2]`,
		`{"by":11,"by":12}`,
		`{"By":13,"NOTE":"case-insensitive"}`,
		"{\"note\":\"\xff\"}", // invalid UTF-8 is replaced
		`{"by":1e400}`,
		`{"by":14}`,
		`{"by":15,"unknown":{"deep":[1,{"x":null}]},"note":"\u00e9\ud83d\ude00\n"}`,
		`{"by":null,"note":null,"items":null,"attrs":null}`,
		`{"by":1.0}`, // a float into an int: Unmarshal refuses
		`{"by":-0,"items":[],"attrs":{}}`,
		`{"by":9223372036854775807}`,
		`{"by":9223372036854775808}`,
		`{"note":"\ud800"}`, // a lone surrogate
		`{"by":16,}`,
		`{"items":["a",null,"b"]}`,
	}
	for _, in := range inputs {
		requireDecodesAsUnmarshal(t, []byte(in))
	}
}

// requireDecodesAsUnmarshal fails unless jsonDecoders gives json.Unmarshal's
// value and error for in, into a struct and into an interface.
func requireDecodesAsUnmarshal(t *testing.T, in []byte) {
	t.Helper()
	var p jsonDecoders
	for _, typ := range []reflect.Type{reflect.TypeFor[jsonDecodeEvent](), reflect.TypeFor[any]()} {
		want := reflect.New(typ).Interface()
		wantErr := json.Unmarshal(in, want)
		got, err := p.unmarshal(in, reflect.New(typ).Interface(), func() any { return reflect.New(typ).Interface() })
		if wantErr != nil {
			require.Error(t, err, "input %q into %s", in, typ)
			require.Equal(t, wantErr.Error(), err.Error(), "input %q into %s", in, typ)
			require.Nil(t, got)
			continue
		}
		require.NoError(t, err, "input %q into %s", in, typ)
		require.Equal(t, want, got, "input %q into %s", in, typ)
	}
}

// FuzzJSONDecoders: whatever the input, jsonDecoders answers as
// json.Unmarshal does (go test -fuzz FuzzJSONDecoders ./runtime).
func FuzzJSONDecoders(f *testing.F) {
	for _, s := range []string{`{"by":1,"note":"n","items":["a"],"attrs":{"k":"v"}}`, `{"By":2,"by":3}`, `[{"a":1e3}]`, "\"\xff\"", `{"note":"\ud800x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { requireDecodesAsUnmarshal(t, in) })
}

// Concurrent decodes share the pool without mixing their inputs.
func TestJSONDecodersConcurrent(t *testing.T) {
	var p jsonDecoders
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				in, _ := json.Marshal(jsonDecodeEvent{By: g*1000 + i, Note: "n"})
				got, err := p.unmarshal(in, new(jsonDecodeEvent), func() any { return new(jsonDecodeEvent) })
				if err != nil || got.(*jsonDecodeEvent).By != g*1000+i {
					t.Errorf("decoded %+v, %v from %s", got, err, in)
					return
				}
			}
		})
	}
	wg.Wait()
}

// An event decodes with the one allocation of its note's string
// (json.Unmarshal takes five more).
func TestJSONDecodersAllocations(t *testing.T) {
	var p jsonDecoders
	in := []byte(`{"by":1,"note":"n"}`)
	var v jsonDecodeEvent
	_, _ = p.unmarshal(in, &v, nil)
	allocs := testing.AllocsPerRun(50, func() {
		v = jsonDecodeEvent{}
		if _, err := p.unmarshal(in, &v, nil); err != nil {
			t.Fatal(err)
		}
	})
	require.LessOrEqual(t, allocs, 1.0, "the note's string")
}
