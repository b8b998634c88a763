package runtime

import (
	"bytes"
	"encoding/json"
	"sync"
)

// jsonDecoders decodes event data for JSONCodec exactly as json.Unmarshal
// does, with reused json.Decoders: json.Unmarshal allocates its decoding
// state for every call (three or four allocations an event), which a fold
// of a thousand events pays a thousand times. Any input a reused decoder
// does not accept whole, it hands to json.Unmarshal, whose result and error
// are then the answer. Safe for concurrent use.
type jsonDecoders struct{ pool sync.Pool }

// jsonDecoder is one reusable decoder reading whatever its reader was last
// reset to.
type jsonDecoder struct {
	r   bytes.Reader
	dec *json.Decoder
}

// unmarshal decodes data into the value v points to; fresh returns another
// new value for json.Unmarshal when the reused decoder gives up, and
// unmarshal returns the value decoded.
func (p *jsonDecoders) unmarshal(data []byte, v any, fresh func() any) (any, error) {
	d, _ := p.pool.Get().(*jsonDecoder)
	if d == nil {
		d = &jsonDecoder{}
		d.dec = json.NewDecoder(&d.r)
	}
	d.r.Reset(data)
	start := d.dec.InputOffset()
	if err := d.dec.Decode(v); err == nil && d.r.Len() == 0 {
		// The decoder read all of data and decoded one value from it;
		// json.Unmarshal also requires that nothing but space follows.
		if rest := data[d.dec.InputOffset()-start:]; len(bytes.TrimLeft(rest, " \t\r\n")) == 0 {
			p.pool.Put(d)
			return v, nil
		}
	}
	// An error, or more after the value: the decoder's state is spent (it
	// is not reused), and json.Unmarshal gives the verdict.
	v = fresh()
	if err := json.Unmarshal(data, v); err != nil {
		return nil, err
	}
	return v, nil
}
