package runtime

import (
	"context"
	"fmt"
	"iter"

	"github.com/scribe-es/scribe/journal"
)

// Typed reads: records from any journal read (ReadStream, Read, ReadAll,
// Subscribe, ReadTypes, …) decoded into the Go values registered with
// RegisterEvent, upcast by RegisterUpcaster to the registered schema version,
// exactly as the actors decode them. No caller parses event JSON by hand.

// Decoded is a stored record with its decoded event value.
type Decoded struct {
	// Record is the stored record; Value its registered Go value (not a
	// pointer), upcast; Erased, sorted, the JSON names of Value's personal
	// fields read as zero values as their subject was erased (nil: none).
	Record journal.Record
	Value  any
	Erased []string
}

// Decode returns the registered Go value of a stored record, upcast, with
// no event read and no lease. It fails with ErrUnknownEvent for an
// unregistered type, else with an error naming the record (a newer schema
// version, an upcaster missing or failing, bad data). Sealed personal fields
// are opened (a key store lookup within Config.RequestTimeout unless cached),
// erased ones read as zero values.
func (rt *Runtime) Decode(rec journal.Record) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rt.cfg.RequestTimeout)
	defer cancel()
	d, err := rt.DecodeRecord(ctx, rec)
	return d.Value, err
}

// DecodeRecord is Decode with a context bounding the key store lookup, also
// naming the erased fields (an erased subject is never an error).
func (rt *Runtime) DecodeRecord(ctx context.Context, rec journal.Record) (Decoded, error) {
	v, erased, err := rt.reg.decodeEvent(ctx, &rec)
	return Decoded{Record: rec, Value: v, Erased: erased}, err
}

// DecodeAsRecord is DecodeAs with DecodeRecord's context and erased fields.
func DecodeAsRecord[E any](ctx context.Context, rt *Runtime, rec journal.Record) (E, []string, error) {
	var zero E
	d, err := rt.DecodeRecord(ctx, rec)
	if err != nil {
		return zero, nil, err
	}
	e, ok := d.Value.(E)
	if !ok {
		return zero, nil, fmt.Errorf("runtime: stored event %q (id %s, position %s) decodes to %T, not %T; decode it with Runtime.Decode and switch on the type",
			rec.Type, rec.ID, rec.Position, d.Value, zero)
	}
	return e, d.Erased, nil
}

// DecodeAs is Runtime.Decode for a caller that knows the records are of
// type E: a record of another type is an error naming both.
func DecodeAs[E any](rt *Runtime, rec journal.Record) (E, error) {
	var zero E
	v, err := rt.Decode(rec)
	if err != nil {
		return zero, err
	}
	e, ok := v.(E)
	if !ok {
		return zero, fmt.Errorf("runtime: stored event %q (id %s, position %s) decodes to %T, not %T; decode it with Runtime.Decode and switch on the type",
			rec.Type, rec.ID, rec.Position, v, zero)
	}
	return e, nil
}

// Decoding wraps a journal iterator (j.ReadStream(ctx, s, 1, 0), say) to
// yield each record decoded. A read error is passed on; a record that does
// not decode comes with its error, Value nil, and iteration goes on if the
// caller does.
func (rt *Runtime) Decoding(records iter.Seq2[journal.Record, error]) iter.Seq2[Decoded, error] {
	return func(yield func(Decoded, error) bool) {
		for rec, err := range records {
			if err != nil {
				if !yield(Decoded{}, err) {
					return
				}
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), rt.cfg.RequestTimeout)
			d, err := rt.DecodeRecord(ctx, rec)
			cancel()
			if !yield(d, err) {
				return
			}
		}
	}
}
