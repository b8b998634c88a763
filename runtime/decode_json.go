package runtime

import (
	"encoding/json"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// jsonDecoders decodes event data for JSONCodec with the semantics of
// encoding/json's Unmarshal, about twice as fast and with one allocation
// an event instead of six: it decodes with go-json-experiment/json's v1
// emulation (the implementation encoding/json itself runs on with Go's
// jsonv2 experiment, which passes encoding/json's own tests), and on any
// error it hands the input to json.Unmarshal on a fresh value, whose
// result and error are then the answer, so a caller sees encoding/json's
// error texts. A fold of a thousand events decodes a thousand of them:
// this is most of the client's time in an aggregate's load
// (BenchmarkStateReplay). TestJSONDecodersMatchUnmarshal and
// FuzzJSONDecoders compare the two on every input they are given. Safe
// for concurrent use.
type jsonDecoders struct{}

// unmarshal decodes data into the value v points to; fresh returns another
// new value for json.Unmarshal when the fast decoder refuses data, and
// unmarshal returns the value decoded.
func (jsonDecoders) unmarshal(data []byte, v any, fresh func() any) (any, error) {
	if err := jsonv1.Unmarshal(data, v); err == nil {
		return v, nil
	}
	v = fresh()
	if err := json.Unmarshal(data, v); err != nil {
		return nil, err
	}
	return v, nil
}
