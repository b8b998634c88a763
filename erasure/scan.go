package erasure

// A scanner of a JSON object's top-level members, so that sealing rewrites
// the few personal values in place (the object's other bytes and its key
// order unchanged) without decoding and re-encoding the whole object. It
// accepts what encoding/json writes; on anything it does not understand
// (escaped keys, malformed input) it reports false and the callers fall
// back to encoding/json.

// member is one top-level member: its key (unescaped: keys with escapes
// make the scan fail) and its value's span in the object.
type member struct {
	ks, ke     int // key span (without quotes)
	start, end int // value span
}

// is reports whether m's key is name (no allocation).
func (m member) is(b []byte, name string) bool { return string(b[m.ks:m.ke]) == name }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"',
// and whether it held an escape; -1 when unterminated.
func skipString(b []byte, i int) (int, bool) {
	escaped := false
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			return i + 1, escaped
		}
	}
	return -1, escaped
}

// skipValue returns the index after the value starting at b[i], -1 when
// malformed.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		j, _ := skipString(b, i)
		return j
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				j, _ := skipString(b, i)
				if j < 0 {
					return -1
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // number, true, false, null
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && !isSpace(b[j]) {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// scanObject returns the top-level members of the JSON object b, or false.
func scanObject(b []byte, out []member) ([]member, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return out, skipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		j, escaped := skipString(b, i)
		if j < 0 || escaped {
			return nil, false
		}
		ks, ke := i+1, j-1
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		end := skipValue(b, i)
		if end < 0 {
			return nil, false
		}
		out = append(out, member{ks: ks, ke: ke, start: i, end: end})
		i = skipSpace(b, end)
		if i >= len(b) {
			return nil, false
		}
		if b[i] == '}' {
			return out, skipSpace(b, i+1) == len(b)
		}
		if b[i] != ',' {
			return nil, false
		}
		i = skipSpace(b, i+1)
	}
}

// TopLevelField returns the raw JSON value of the top-level member name of
// the JSON object data, and whether it is present.
func TopLevelField(data []byte, name string) ([]byte, bool, error) {
	var buf [16]member
	ms, ok := scanObject(data, buf[:0])
	if !ok {
		return topLevelFieldSlow(data, name)
	}
	for _, m := range ms {
		if m.is(data, name) {
			return data[m.start:m.end], true, nil
		}
	}
	return nil, false, nil
}
