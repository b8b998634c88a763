package backend

import (
	"encoding/json"

	"github.com/scribe-es/scribe/journal"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

// AppendMetadataJSON and DecodeMetadataJSON replace json.Marshal and
// json.Unmarshal of a journal.Metadata on a backend's append and read paths.
// Each is exactly equivalent to encoding/json: it handles the common case
// itself and hands everything else (errors, escapes, anything unusual) to
// encoding/json, so the two can never disagree. The differential and fuzz
// tests in metadata_test.go hold them to that.

// AppendMetadataJSON appends the JSON encoding of m to dst and returns the
// extended slice. The bytes are exactly those of json.Marshal(m). It writes
// plain ASCII text itself and leaves text that needs escaping to json.Marshal.
//
// json.Marshal fails only when m.CreatedAt has no RFC 3339 form (a year outside
// 0 to 9999, or a zone offset of 24 hours or more). AppendMetadataJSON then
// returns dst unchanged; as every encoding is at least "{}", a caller tells
// failure by nothing having been appended, and calls json.Marshal for the error.
func AppendMetadataJSON(dst []byte, m *journal.Metadata) []byte {
	n0 := len(dst)
	size := len(`{}`) + len(m.CorrelationID) + len(m.CausationID) + len(m.UserID) + len(m.IdempotencyKey) +
		len(m.Partition) + len(m.TraceParent) + len(m.TraceState) + len(m.CommandHash) + 10*len(`"xxxxxxxxxxxxxx":"",`) +
		len(`"2006-01-02T15:04:05.999999999Z"`)
	for _, s := range m.Scopes {
		size += len(s) + len(`"",`)
	}
	dst = slices.Grow(dst, size)
	dst = append(dst, '{')
	ok := true
	dst, ok = appendMetadataString(dst, n0, `"correlationId":`, m.CorrelationID, ok)
	dst, ok = appendMetadataString(dst, n0, `"causationId":`, m.CausationID, ok)
	dst, ok = appendMetadataString(dst, n0, `"userId":`, m.UserID, ok)
	dst, ok = appendMetadataString(dst, n0, `"idempotencyKey":`, m.IdempotencyKey, ok)
	if len(m.Scopes) > 0 && ok {
		if len(dst) > n0+1 {
			dst = append(dst, ',')
		}
		dst = append(dst, `"scopes":[`...)
		for k, s := range m.Scopes {
			if !plainASCII(s) {
				ok = false
				break
			}
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = append(dst, s...)
			dst = append(dst, '"')
		}
		dst = append(dst, ']')
	}
	dst, ok = appendMetadataString(dst, n0, `"partition":`, m.Partition, ok)
	if !m.CreatedAt.IsZero() && ok {
		if len(dst) > n0+1 {
			dst = append(dst, ',')
		}
		dst = append(dst, `"createdAt":"`...)
		t0 := len(dst)
		dst = m.CreatedAt.AppendFormat(dst, time.RFC3339Nano)
		// time.Time.MarshalJSON writes the same text, or fails when the year
		// is not four digits wide or the zone offset is out of range. A UTC
		// time with a four-digit year is always fine; leave the rest to it.
		if dst[t0+len("2006")] != '-' || dst[len(dst)-1] != 'Z' {
			ok = false
		}
		dst = append(dst, '"')
	}
	dst, ok = appendMetadataString(dst, n0, `"traceParent":`, m.TraceParent, ok)
	dst, ok = appendMetadataString(dst, n0, `"traceState":`, m.TraceState, ok)
	dst, ok = appendMetadataString(dst, n0, `"commandHash":`, m.CommandHash, ok)
	if !ok {
		b, err := json.Marshal(m)
		if err != nil {
			return dst[:n0]
		}
		return append(dst[:n0], b...)
	}
	return append(dst, '}')
}

// appendMetadataString appends the member key (quoted, with its colon) and the
// string v unless v is empty (omitempty). It gives up, returning false, when
// v needs escaping or an earlier member already gave up.
func appendMetadataString(dst []byte, n0 int, key, v string, ok bool) ([]byte, bool) {
	if v == "" || !ok {
		return dst, ok
	}
	if !plainASCII(v) {
		return dst, false
	}
	if len(dst) > n0+1 {
		dst = append(dst, ',')
	}
	dst = append(dst, key...)
	dst = append(dst, '"')
	dst = append(dst, v...)
	return append(dst, '"'), true
}

// plainASCII reports whether json.Marshal writes s unchanged between quotes:
// printable ASCII other than the quote, the backslash and the characters it
// escapes for HTML (<, >, &).
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// metadataKeys lists Metadata's JSON keys, spelled exactly as json.Marshal
// writes them; a key's index is its bit in decodeMetadataFast's set of seen keys.
var metadataKeys = [...]string{
	"correlationId", "causationId", "userId", "idempotencyKey", "scopes",
	"partition", "createdAt", "traceParent", "traceState", "commandHash",
}

// DecodeMetadataJSON decodes data, the JSON encoding of a Metadata, into *m.
// The result, and whether it fails, are exactly those of json.Unmarshal(data,
// &fresh) for a zero Metadata fresh, which then replaces *m whole: fields that
// data leaves out are zero afterwards. On failure it returns json.Unmarshal's
// error and leaves *m unchanged.
//
// It decodes what AppendMetadataJSON and json.Marshal write (exact key
// spellings, no whitespace, no escapes) itself and hands anything else to
// json.Unmarshal.
func DecodeMetadataJSON(data []byte, m *journal.Metadata) error {
	var md journal.Metadata
	if decodeMetadataFast(data, &md) {
		*m = md
		return nil
	}
	var slow journal.Metadata
	if err := json.Unmarshal(data, &slow); err != nil {
		return err
	}
	*m = slow
	return nil
}

// decodeMetadataFast decodes data into *m when data is a compact object of
// distinct, exactly spelled Metadata keys whose values are strings without
// escapes (an array of them for scopes), and reports whether it did. When it
// returns false, *m may hold part of the data.
func decodeMetadataFast(data []byte, m *journal.Metadata) bool {
	if len(data) < 2 || data[0] != '{' || data[len(data)-1] != '}' {
		return false
	}
	if len(data) == 2 {
		return true
	}
	// s views data without a copy while it is parsed; the string fields are
	// substrings of owned, one copy of data made at the first of them, so
	// metadata of createdAt alone (the runtime's) costs no allocation and
	// nothing decoded refers to data.
	s := unsafe.String(unsafe.SliceData(data), len(data))
	var owned string
	keep := func(v string, end int) string {
		if owned == "" {
			owned = string(data)
		}
		return owned[end-len(v) : end]
	}
	var seen uint16
	i := 1
	for {
		// A key.
		key, next, ok := fastString(s, i)
		if !ok || next >= len(s) || s[next] != ':' {
			return false
		}
		i = next + 1
		field := -1
		for k, name := range metadataKeys {
			if key == name {
				field = k
				break
			}
		}
		if field < 0 || seen&(1<<field) != 0 {
			return false
		}
		seen |= 1 << field

		// Its value.
		if metadataKeys[field] == "scopes" {
			if i >= len(s) || s[i] != '[' {
				return false
			}
			i++
			for {
				scope, next, ok := fastString(s, i)
				if !ok || next >= len(s) {
					return false
				}
				m.Scopes = append(m.Scopes, keep(scope, next-1))
				i = next + 1
				if s[next] == ']' {
					break
				}
				if s[next] != ',' {
					return false
				}
			}
		} else {
			v, next, ok := fastString(s, i)
			if !ok {
				return false
			}
			i = next
			if metadataKeys[field] != "createdAt" {
				v = keep(v, next-1)
			}
			switch metadataKeys[field] {
			case "correlationId":
				m.CorrelationID = v
			case "causationId":
				m.CausationID = v
			case "userId":
				m.UserID = v
			case "idempotencyKey":
				m.IdempotencyKey = v
			case "partition":
				m.Partition = v
			case "createdAt":
				// json.Unmarshal hands the quoted text, as it is in data, to
				// time.Time.UnmarshalJSON (an RFC 3339 parse); so does this.
				if m.CreatedAt.UnmarshalJSON(data[i-len(v)-2:i]) != nil {
					return false
				}
			case "traceParent":
				m.TraceParent = v
			case "traceState":
				m.TraceState = v
			case "commandHash":
				m.CommandHash = v
			}
		}

		// A comma, or the closing brace that ends data.
		if i >= len(s) {
			return false
		}
		if s[i] == '}' {
			return i == len(s)-1
		}
		if s[i] != ',' {
			return false
		}
		i++
	}
}

// fastString reads the string whose opening quote is s[i]. It returns its text
// and the index after its closing quote, or false when there is none or the
// string holds an escape, a control character or invalid UTF-8 (json.Unmarshal
// would change those bytes).
func fastString(s string, i int) (string, int, bool) {
	if i >= len(s) || s[i] != '"' {
		return "", 0, false
	}
	i++
	end := strings.IndexByte(s[i:], '"')
	if end < 0 {
		return "", 0, false
	}
	v := s[i : i+end]
	ascii := true
	for k := 0; k < len(v); k++ {
		c := v[k]
		if c < 0x20 || c == '\\' {
			return "", 0, false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if !ascii && !utf8.ValidString(v) {
		return "", 0, false
	}
	return v, i + end + 1, true
}
