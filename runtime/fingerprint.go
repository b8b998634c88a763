package runtime

import (
	"crypto/sha256"

	"encoding/hex"
	"fmt"
	"reflect"
	"strings"

	"github.com/scribe-es/scribe/actors"
)

// typeFingerprint is a short hash of t's shape: for a struct its type's
// full name and each exported field's name, tag and type, recursively; for
// containers their kind and element types. Two types that encode alike to
// the codec have the same fingerprint; renaming, adding, removing or
// retyping a field changes it (and so does renaming or moving the type:
// its snapshots are then ignored once, which costs a replay, never a wrong
// state).
func typeFingerprint(t reflect.Type) string {
	var b strings.Builder
	writeShape(&b, t, map[reflect.Type]bool{})
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

func writeShape(b *strings.Builder, t reflect.Type, seen map[reflect.Type]bool) {
	if t.PkgPath() != "" && t.Name() != "" {
		if seen[t] { // a recursive type: its shape is written once
			fmt.Fprintf(b, "ref(%s.%s)", t.PkgPath(), t.Name())
			return
		}
		seen[t] = true
	}
	switch t.Kind() {
	case reflect.Struct:
		fmt.Fprintf(b, "struct %s.%s{", t.PkgPath(), t.Name())
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			fmt.Fprintf(b, "%s %q ", f.Name, string(f.Tag))
			writeShape(b, f.Type, seen)
			b.WriteByte(';')
		}
		b.WriteByte('}')
	case reflect.Pointer, reflect.Slice, reflect.Array:
		fmt.Fprintf(b, "%s[", t.Kind())
		if t.Kind() == reflect.Array {
			fmt.Fprintf(b, "%d", t.Len())
		}
		writeShape(b, t.Elem(), seen)
		b.WriteByte(']')
	case reflect.Map:
		b.WriteString("map[")
		writeShape(b, t.Key(), seen)
		b.WriteByte(']')
		writeShape(b, t.Elem(), seen)
	default:
		// Basic kinds, interfaces, and named types with their own encoding
		// (time.Time, json.RawMessage …) by their full name.
		fmt.Fprintf(b, "%s(%s.%s)", t.Kind(), t.PkgPath(), t.Name())
	}
}

// SnapshotState encodes s as an aggregate's snapshots with state type S hold
// it: the codec's encoding (nil means JSONCodec) behind S's shape
// fingerprint. For tools and tests that write snapshots themselves
// (snapshots.Store.Save, with the aggregate's SchemaVersion); the runtime
// ignores snapshots of another shape, and one written without this.
func SnapshotState[S any](codec Codec, s S) ([]byte, error) {
	if codec == nil {
		codec = JSONCodec{}
	}
	data, err := codec.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("runtime: encoding a snapshot state of %s: %w", reflect.TypeFor[S](), err)
	}
	return actors.WithFingerprint(typeFingerprint(reflect.TypeFor[S]()), data), nil
}
