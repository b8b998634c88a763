package runtime

import "encoding/json"

// Codec serializes event payloads and aggregate states. Event payloads must
// encode to a JSON object (the journal stores event data as JSON); states
// (snapshots) may use any format. Implementations must be safe for concurrent
// use.
type Codec interface {
	// Marshal encodes v.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes data into the value v points to.
	Unmarshal(data []byte, v any) error
}

// JSONCodec is the default Codec: encoding/json.
type JSONCodec struct{}

// Marshal implements Codec with json.Marshal.
func (JSONCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal implements Codec with json.Unmarshal.
func (JSONCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
