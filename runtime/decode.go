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
	// Record is the stored record (position, tags, metadata, raw data).
	Record journal.Record
	// Value is the registered Go value of the event (a value, not a
	// pointer), after upcasting.
	Value any
	// Erased names the personal fields (JSON names) of Value that hold
	// their zero value because their subject was erased, sorted; nil when
	// none.
	Erased []string
}

// Decode returns the registered Go value of a stored record, upcast from its
// stored schema version to the registered one. It fails with ErrUnknownEvent
// when the record's type is not registered, and with an error naming the
// record when its schema version is newer than the registered one, an
// upcaster is missing or fails, or the data does not decode. It reads nothing
// and takes no lease. Sealed personal fields are opened (a key store
// lookup, bounded by Config.RequestTimeout, unless the key is cached);
// those of erased subjects decode to zero values: use DecodeRecord to learn
// which.
func (rt *Runtime) Decode(rec journal.Record) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rt.cfg.RequestTimeout)
	defer cancel()
	d, err := rt.DecodeRecord(ctx, rec)
	return d.Value, err
}

// DecodeRecord is Decode with a context bounding the key store lookup, and
// it reports the personal fields that read as zero values because their
// subject was erased (Decoded.Erased). An erased subject is never an error.
func (rt *Runtime) DecodeRecord(ctx context.Context, rec journal.Record) (Decoded, error) {
	v, erased, err := rt.reg.decodeEvent(ctx, &rec)
	return Decoded{Record: rec, Value: v, Erased: erased}, err
}

// DecodeAsRecord is DecodeAs with a context, also returning the erased
// personal fields (see DecodeRecord).
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

// DecodeAs decodes rec (see Runtime.Decode) and returns it as E. A record of
// another registered type is an error that names both types; use it when
// the caller knows the stream or query yields only E.
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

// Decoding wraps a journal iterator (for example j.ReadStream(ctx, stream, 1,
// 0)) so that it yields each record with its decoded value. A read error is
// passed on as is; a record that does not decode yields its Decoded (Value
// nil) with the decode error, and iteration continues if the caller does.
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
