package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// The tests here hold fastjson.go to encoding/json: compactJSON to json.Valid
// and json.Compact. The tables run as the fuzzer's seed corpus too.

var compactCases = []string{
	// Valid documents, compact and spaced.
	`{}`, `[]`, `{"a":1}`, ` { "a" : 1 } `, "\t{\n\"a\"\r:\n[ 1 , 2 ,\t3 ]\n}\n",
	`{"a":{"b":{"c":[[],[{}],{"d":null}]}}}`,
	`[ [ ] , { } , [ { } ] ]`,
	`{"k":"v w","x":" spaced string ","y":"\t"}`,
	`{"s":"tab\tinside"}`,
	`{"esc":"\" \\ \/ \b \f \n \r \t \u0041 \u00e9 \uD83D\uDE00 \uDEAD \ud800"}`,
	`{"html":"<a href=\"x\">&amp;</a>","ls":"` + "\u2028\u2029" + `"}`,
	`{"u":"héllo wörld ✓ 😀"}`,
	`{"n":[0,-0,1,-1,12.5,0.5E-3,1e+10,1E10,1e-10,-0.0,123456789012345678901234567890]}`,
	`{"b":[true,false,null]}`,
	`{"a":"" , "b" : [ ] }`,
	`{"a":1,"a":2}`,
	`{ "q" : "say \"hi\" " , "bs\\" : [ "\\" , "\"" , "\\\"" ] }`,
	` [ "a\" ]" , "\\" ] `,
	`{"a" : "\u0022 \" x" }`,
	`{"a\q":1}`, `{"a\u00":1}`, `{"a":[1e5 , 2.5e-3 ]}`,
	// Lone values, which json.Compact accepts (prepareData rejects them later).
	`1`, ` -0 `, `"x"`, `"x" `, `null`, ` true`, `false `, `0.5`, `[1]`,
	// Invalid documents.
	``, ` `, "\n\t", `{`, `}`, `[`, `]`, `{]`, `[}`, `{"a"}`, `{"a":}`, `{"a" 1}`, `{a:1}`, `{'a':1}`,
	`{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `[1 2]`, `{"a":1 "b":2}`,
	`01`, `-01`, `1.`, `.5`, `+1`, `-`, `1e`, `1e+`, `1E-`, `0x10`, `1.e5`, `-.5`, `Infinity`, `NaN`, `{"a":NaN}`,
	`tru`, `truex`, `nul`, `nulll`, `False`, `t`,
	`{} {}`, `{}x`, `{}}`, `[]]`, `1 2`, `{"a":1} ,`,
	`"unterminated`, `"bad \x escape"`, `"\u12"`, `"\u12G4"`, `"\`, `"\u"`, `"\u123"`,
	"\"control \x01 char\"", "{\"a\":\"new\nline\"}", "\"\x00\"", "\"\x1f\"", "\"\x7f\"",
	"\x00", "{}\x00", "\v{}", "{}\f", "\u00a0{}",
	// Invalid UTF-8 inside and outside strings.
	"\"\xff\"", "{\"a\":\"\xc3\x28\"}", "\"\xed\xa0\x80\"", "\xff", "{\"\xfe\":1}", "[\"\xe2\x80\"]",
}

// deepCases nests arrays and objects around json.Compact's limit of 10000
// levels and around maxFastDepth.
func deepCases() []string {
	var out []string
	for _, depth := range []int{maxFastDepth - 1, maxFastDepth, maxFastDepth + 1, 9999, 10000, 10001, 10500} {
		out = append(out,
			strings.Repeat("[", depth)+strings.Repeat("]", depth),
			strings.Repeat(`{"a":`, depth-1)+"{}"+strings.Repeat("}", depth-1),
			strings.Repeat("[ ", depth)+"1"+strings.Repeat(" ]", depth),
			strings.Repeat("[", depth)+strings.Repeat("]", depth-1), // one short
		)
	}
	return out
}

// checkCompact compares compactJSON on src with json.Valid and json.Compact.
func checkCompact(t *testing.T, src []byte) {
	t.Helper()
	var want bytes.Buffer
	wantErr := json.Compact(&want, src)
	if valid := json.Valid(src); valid != (wantErr == nil) {
		t.Fatalf("json.Valid says %v but json.Compact says %v for %q", valid, wantErr, src)
	}
	prefix := []byte("prefix")
	got, err := compactJSON(prefix[:len(prefix):len(prefix)], bytes.Clone(src))
	if !bytes.HasPrefix(got, prefix) {
		t.Fatalf("compactJSON(%q) dropped dst: got %q", src, got)
	}
	got = got[len(prefix):]
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("compactJSON(%q): error %v, json.Compact's error %v", src, err, wantErr)
	case err != nil:
		if err.Error() != wantErr.Error() {
			t.Fatalf("compactJSON(%q): error %q, json.Compact's error %q", src, err, wantErr)
		}
		if len(got) != 0 {
			t.Fatalf("compactJSON(%q) failed but appended %q", src, got)
		}
	case !bytes.Equal(got, want.Bytes()):
		t.Fatalf("compactJSON(%q) = %q, json.Compact gives %q", src, got, want.Bytes())
	}
}

// oldPrepareData is prepareData as it was with json.Compact, the behaviour the
// new one must keep.
func oldPrepareData(raw json.RawMessage, limits Limits) (json.RawMessage, string) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, "the event data is empty; give it a JSON object (use {} for no fields)"
	}
	if !utf8.Valid(raw) {
		return nil, "the event data is not valid UTF-8; encode text as UTF-8 JSON"
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Sprintf("the event data is not valid JSON (%v); give it a JSON object", err)
	}
	data := buf.Bytes()
	if data[0] != '{' {
		return nil, fmt.Sprintf("the event data is a JSON %s, not an object; wrap it in an object such as {\"value\": ...}", jsonKind(data[0]))
	}
	if max := limits.maxDataSize(); len(data) > max {
		return nil, fmt.Sprintf("the event data is %d bytes (compacted), over the limit of %d bytes; store large payloads elsewhere and reference them", len(data), max)
	}
	return json.RawMessage(data), ""
}

func checkPrepareData(t *testing.T, src []byte) {
	t.Helper()
	for _, limits := range []Limits{{}, {MaxDataSize: 8}} {
		want, wantReason := oldPrepareData(src, limits)
		in := bytes.Clone(src)
		got, reason := prepareData(in, limits)
		if !bytes.Equal(got, want) || (got == nil) != (want == nil) || reason != wantReason {
			t.Fatalf("prepareData(%q, %+v) = %q, %q; before it was %q, %q", src, limits, got, reason, want, wantReason)
		}
		if !bytes.Equal(in, src) {
			t.Fatalf("prepareData(%q) modified its input to %q", src, in)
		}
		if len(got) > 0 && len(in) > 0 && &got[0] == &in[0] {
			t.Fatalf("prepareData(%q) returned the caller's bytes, not a copy", src)
		}
	}
}

func TestCompactJSONMatchesEncodingJSON(t *testing.T) {
	for _, c := range append(compactCases, deepCases()...) {
		checkCompact(t, []byte(c))
		checkPrepareData(t, []byte(c))
	}
}

func FuzzCompactJSON(f *testing.F) {
	for _, c := range compactCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		checkCompact(t, src)
		checkPrepareData(t, src)
	})
}

// TestFastPathsTaken checks that common input takes the fast paths (the
// differential tests would pass even if everything fell back to encoding/json).
func TestFastPathsTaken(t *testing.T) {
	for _, d := range benchData() {
		if _, ok := appendCompactFast(nil, d.src); !ok {
			t.Errorf("compactJSON fell back to json.Compact for the %s benchmark data", d.name)
		}
	}
}

func benchData() []struct {
	name string
	src  []byte
} {
	type line struct {
		SKU      string  `json:"sku"`
		Quantity int     `json:"quantity"`
		Price    float64 `json:"price"`
	}
	v := map[string]any{
		"orderId":  "0190a8c4-6f1e-7c3a-9d2b-5e8f1a2b3c4d",
		"customer": map[string]any{"id": "c-42", "name": "Ada Lovelace", "email": "ada@example.com"},
		"lines":    []line{{"A-1", 2, 12.5}, {"B-22", 1, 99.99}, {"C-333", 10, 0.5}},
		"total":    129.99,
		"note":     "leave at the door",
		"paid":     true,
	}
	compact, _ := json.Marshal(v)
	indented, _ := json.MarshalIndent(v, "", "  ")
	return []struct {
		name string
		src  []byte
	}{{"compact", compact}, {"indented", indented}}
}

func BenchmarkCompact(b *testing.B) {
	for _, d := range benchData() {
		name, src := d.name, d.src
		b.Run(name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				var buf bytes.Buffer
				buf.Grow(len(src))
				if err := json.Compact(&buf, src); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/fast", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := compactJSON(make([]byte, 0, len(src)), src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
