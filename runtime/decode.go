package runtime

import (
	"context"
	"fmt"
	"iter"

	"github.com/scribe-es/scribe/journal"
)

// Typed reads: records from any journal read (ReadStream, Read, ReadAll,
// Subscribe, ReadTypes, …) decoded into the Go values registered with
// RegisterEvent, upcast by RegisterUpcaster and RegisterEventUpcaster to
// this build's types, exactly as the actors decode them. No caller parses
// event JSON by hand.
//
// A stored event may upcast to several values (a split) or to none (a
// retired type). Decoding and DecodeValues give each value as its own
// Decoded, in order, all with the same Record (position, tags, per-tag
// versions) and Index 0, 1, …; a retired event gives none. A projection
// that decodes its batch's records this way applies every value of a
// record in the same Handle call, so in the same transaction as the
// checkpoint that passes the record's position: each value is applied
// exactly once, and a value is identified by (Record.Position, Index).
// Decode, DecodeRecord and DecodeAs give one value and fail with
// ErrNotOneEvent on such a record.

// Decoded is a stored record with one event value decoded from it.
type Decoded struct {
	// Record is the stored record; Value its registered Go value (not a
	// pointer), upcast; Erased, sorted, the JSON names of the stored event's
	// personal fields read as zero values as their subject was erased (nil:
	// none).
	Record journal.Record
	Value  any
	Erased []string
	// Type is Value's registered event type name: Record.Type, or the name
	// an upcaster gave it (a rename, a split, a merge).
	Type string
	// Index is Value's place among the values Record upcasts to: 0, and
	// 1, 2, … for the further values of a split.
	Index int
}

// Decode returns the registered Go value of a stored record, upcast, with
// no event read and no lease. It fails with ErrUnknownEvent for an
// unregistered type, with ErrNotOneEvent for a record that upcasts to no
// value or several (read those with DecodeValues), else with an error
// naming the record (a newer schema version, an upcaster missing or
// failing, bad data). Sealed personal fields are opened (a key store lookup
// within Config.RequestTimeout unless cached), erased ones read as zero
// values.
func (rt *Runtime) Decode(rec journal.Record) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rt.cfg.RequestTimeout)
	defer cancel()
	d, err := rt.DecodeRecord(ctx, rec)
	return d.Value, err
}

// DecodeRecord is Decode with a context bounding the key store lookup, also
// naming the erased fields (an erased subject is never an error).
func (rt *Runtime) DecodeRecord(ctx context.Context, rec journal.Record) (Decoded, error) {
	var buf [1]upcastValue
	values, erased, err := rt.reg.decodeValues(ctx, &rec, buf[:0])
	if err == nil && len(values) != 1 {
		err = notOneEvent(&rec, values)
	}
	if err != nil {
		return Decoded{Record: rec}, err
	}
	return Decoded{Record: rec, Value: values[0].value, Erased: erased, Type: values[0].typ}, nil
}

// DecodeValues returns every value a stored record upcasts to, in order:
// one for most records, several for a split event, none for a retired
// type. It fails as Decode does, except that it never fails with
// ErrNotOneEvent. The Decoded values share rec and their Erased slice.
func (rt *Runtime) DecodeValues(ctx context.Context, rec journal.Record) ([]Decoded, error) {
	values, erased, err := rt.reg.decodeValues(ctx, &rec, nil)
	if err != nil {
		return nil, err
	}
	out := make([]Decoded, len(values))
	for i, v := range values {
		out[i] = Decoded{Record: rec, Value: v.value, Erased: erased, Type: v.typ, Index: i}
	}
	return out, nil
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
// yield each record decoded: one Decoded per value it upcasts to (see
// DecodeValues), none for a retired type. A read error is passed on; a
// record that does not decode comes with its error, Value nil, and
// iteration goes on if the caller does.
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
			values, err := rt.DecodeValues(ctx, rec)
			cancel()
			if err != nil {
				if !yield(Decoded{Record: rec}, err) {
					return
				}
				continue
			}
			for _, d := range values {
				if !yield(d, nil) {
					return
				}
			}
		}
	}
}
