package journal

import (
	"bytes"
	"encoding/json"
)

// This file holds a hand-written replacement for json.Compact on the append
// path (compacting event data). It is exactly equivalent to encoding/json: it
// handles the common case itself and hands everything else (errors, escapes,
// anything unusual) to encoding/json, so the two can never disagree. The
// differential and fuzz tests in fastjson_test.go hold it to that. Package
// journal/backend holds the same kind of replacement for metadata.

// maxFastDepth is the deepest nesting of arrays and objects compactJSON checks
// itself; deeper documents go to json.Compact, which allows 10000 levels.
const maxFastDepth = 512

// compactJSON appends to dst the compacted form of src, exactly as json.Compact
// does: src must be exactly one JSON value (what json.Valid accepts), and the
// output is src without the whitespace outside strings, every other byte as it
// was (escapes and HTML characters are not rewritten). On failure it returns
// dst unchanged and json.Compact's error.
func compactJSON(dst, src []byte) ([]byte, error) {
	if out, ok := appendCompactFast(dst, src); ok {
		return out, nil
	}
	// An error, or nesting deeper than appendCompactFast follows: json.Compact
	// gives the verdict and, on failure, its error message.
	var buf bytes.Buffer
	if err := json.Compact(&buf, src); err != nil {
		return dst, err
	}
	return append(dst, buf.Bytes()...), nil
}

func isJSONSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// plainStringByte marks the bytes a JSON string may hold unescaped: everything
// but the quote, the backslash and control characters. Like json.Valid, it
// accepts every byte from 0x80 up, valid UTF-8 or not.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendCompactFast appends src without its whitespace outside strings to dst
// when src is exactly one JSON value with at most maxFastDepth levels of
// nesting. Otherwise, for invalid JSON and deeper nesting alike, it returns
// false (and dst in some state the caller discards). It is one pass over src:
// the runs between whitespace are appended whole, so src without whitespace is
// appended in one copy.
func appendCompactFast(dst, src []byte) ([]byte, bool) {
	// open records, per nesting level, whether the container is an object (1)
	// or an array (0).
	var open [maxFastDepth / 64]uint64
	depth := 0
	start := 0 // src[start:i] is still to be appended
	i, n := 0, len(src)

	const (
		wantValue        = iota // a value
		wantValueOrClose        // a value or ']', after '['
		wantKey                 // an object key, after ','
		wantKeyOrClose          // an object key or '}', after '{'
		wantColon               // the ':' after a key
		afterValue              // ',' or a closing bracket, or the end at the top level
	)
	state := wantValue
	for {
		if i < n && isJSONSpace(src[i]) {
			dst = append(dst, src[start:i]...)
			for i++; i < n && isJSONSpace(src[i]); i++ {
			}
			start = i
		}
		if i == n {
			if state != afterValue || depth != 0 {
				return dst, false
			}
			return append(dst, src[start:]...), true
		}
		c := src[i]
		switch state {
		case wantValueOrClose:
			if c == ']' {
				i++
				depth--
				state = afterValue
				continue
			}
			fallthrough
		case wantValue:
			switch c {
			case '{', '[':
				if depth == maxFastDepth {
					return dst, false
				}
				if c == '{' {
					open[depth/64] |= 1 << (depth % 64)
					state = wantKeyOrClose
				} else {
					open[depth/64] &^= 1 << (depth % 64)
					state = wantValueOrClose
				}
				depth++
				i++
				continue
			case '"':
				i = scanJSONString(src, i+1)
			case 't':
				i = scanJSONLiteral(src, i, "true")
			case 'f':
				i = scanJSONLiteral(src, i, "false")
			case 'n':
				i = scanJSONLiteral(src, i, "null")
			default:
				i = scanJSONNumber(src, i)
			}
			if i < 0 {
				return dst, false
			}
			state = afterValue
		case wantKeyOrClose:
			if c == '}' {
				i++
				depth--
				state = afterValue
				continue
			}
			fallthrough
		case wantKey:
			if c != '"' {
				return dst, false
			}
			if i = scanJSONString(src, i+1); i < 0 {
				return dst, false
			}
			state = wantColon
		case wantColon:
			if c != ':' {
				return dst, false
			}
			i++
			state = wantValue
		case afterValue:
			if depth == 0 {
				return dst, false // a second value, or garbage, after the top-level one
			}
			inObject := open[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			switch {
			case c == ',':
				i++
				if inObject {
					state = wantKey
				} else {
					state = wantValue
				}
			case c == '}' && inObject, c == ']' && !inObject:
				i++
				depth--
			default:
				return dst, false
			}
		}
	}
}

// scanJSONString returns the index after the string whose opening quote is
// just before src[i], or -1 when the string is malformed or unterminated.
func scanJSONString(src []byte, i int) int {
	for i < len(src) {
		c := src[i]
		if plainStringByte[c] {
			i++
			continue
		}
		switch c {
		case '"':
			return i + 1
		case '\\':
			if i+1 == len(src) {
				return -1
			}
			switch src[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(src) || !isHex(src[i+2]) || !isHex(src[i+3]) || !isHex(src[i+4]) || !isHex(src[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default: // a control character
			return -1
		}
	}
	return -1
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanJSONLiteral returns the index after lit at src[i:], or -1.
func scanJSONLiteral(src []byte, i int, lit string) int {
	if len(src)-i < len(lit) || string(src[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// scanJSONNumber returns the index after the number at src[i:], or -1. What
// follows the number is the caller's to check ("01" is the number 0 followed by
// a stray 1).
func scanJSONNumber(src []byte, i int) int {
	n := len(src)
	if i < n && src[i] == '-' {
		i++
	}
	switch {
	case i == n:
		return -1
	case src[i] == '0':
		i++
	case '1' <= src[i] && src[i] <= '9':
		for i++; i < n && isDigit(src[i]); i++ {
		}
	default:
		return -1
	}
	if i < n && src[i] == '.' {
		i++
		if i == n || !isDigit(src[i]) {
			return -1
		}
		for i++; i < n && isDigit(src[i]); i++ {
		}
	}
	if i < n && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < n && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if i == n || !isDigit(src[i]) {
			return -1
		}
		for i++; i < n && isDigit(src[i]); i++ {
		}
	}
	return i
}
