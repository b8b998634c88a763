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
	}
	var p jsonDecoders
	typ := reflect.TypeFor[jsonDecodeEvent]()
	for round := range 2 {
		for _, in := range inputs {
			want := reflect.New(typ).Interface()
			wantErr := json.Unmarshal([]byte(in), want)
			got, err := p.unmarshal([]byte(in), reflect.New(typ).Interface(), func() any { return reflect.New(typ).Interface() })
			if wantErr != nil {
				require.Error(t, err, "round %d, input %q", round, in)
				require.Equal(t, wantErr.Error(), err.Error(), "round %d, input %q", round, in)
				require.Nil(t, got)
				continue
			}
			require.NoError(t, err, "round %d, input %q", round, in)
			require.Equal(t, want, got, "round %d, input %q", round, in)
		}
	}
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

// A reused decoder decodes an event with the one allocation of the value
// it fills (json.Unmarshal takes four or five more).
func TestJSONDecodersAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops decoders at random")
	}
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
