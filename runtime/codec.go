package runtime

import "encoding/json"

// Codec serializes event payloads, which must encode to JSON objects, and
// snapshot states, in any format. It must be safe for concurrent use.
type Codec interface {
	// Marshal encodes v; Unmarshal decodes data into the value v points to.
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSONCodec is the default Codec: encoding/json.
type JSONCodec struct{}

// Marshal implements Codec with json.Marshal.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal implements Codec with json.Unmarshal.
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
