package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The tests here hold fastjson.go to encoding/json: compactJSON to json.Valid
// and json.Compact, AppendMetadataJSON to json.Marshal, DecodeMetadataJSON to
// json.Unmarshal. The tables run as the fuzzers' seed corpus too.

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

// metadataCases are metadata values for AppendMetadataJSON, including ones
// json.Marshal escapes or fails on.
func metadataCases() []Metadata {
	at := time.Date(2024, 5, 17, 9, 30, 15, 123456000, time.UTC)
	full := Metadata{
		CorrelationID:  "0190a8c4-6f1e-7c3a-9d2b-5e8f1a2b3c4d",
		CausationID:    "0190a8c4-6f1e-7c3a-9d2b-5e8f1a2b3c4e",
		UserID:         "user-42",
		IdempotencyKey: "order-7/attempt",
		Scopes:         []string{"accounts:read", "accounts:write"},
		Partition:      "tenant-a",
		CreatedAt:      at,
		TraceParent:    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		TraceState:     "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
		CommandHash:    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
	}
	with := func(f func(*Metadata)) Metadata {
		m := full
		m.Scopes = append([]string(nil), full.Scopes...)
		f(&m)
		return m
	}
	east := time.FixedZone("east", 5*3600+30*60)
	return []Metadata{
		{},
		{Partition: "default"},
		{CreatedAt: at},
		{Scopes: []string{}},
		{Scopes: []string{""}},
		full,
		with(func(m *Metadata) { m.UserID = "a<b>&c" }),
		with(func(m *Metadata) { m.UserID = `quote " backslash \ slash /` }),
		with(func(m *Metadata) { m.UserID = "ctl \x00 \x01 \b \f \n \r \t \x1f \x7f" }),
		with(func(m *Metadata) { m.UserID = "jörg ✓ 😀" }),
		with(func(m *Metadata) { m.UserID = "sep \u2028 \u2029" }),
		with(func(m *Metadata) { m.UserID = "bad \xff \xc3\x28 \xed\xa0\x80" }),
		with(func(m *Metadata) { m.Scopes = []string{"ok", "<html>"} }),
		with(func(m *Metadata) { m.Scopes = []string{"x\ny"} }),
		with(func(m *Metadata) { m.CommandHash = "&" }),
		with(func(m *Metadata) { m.CreatedAt = at.In(east) }),
		with(func(m *Metadata) { m.CreatedAt = at.Local() }),
		with(func(m *Metadata) { m.CreatedAt = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) }),
		with(func(m *Metadata) { m.CreatedAt = time.Date(2024, 1, 1, 0, 0, 0, 100, time.UTC) }),
		with(func(m *Metadata) { m.CreatedAt = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC) }),
		with(func(m *Metadata) { m.CreatedAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC) }),
		with(func(m *Metadata) { m.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }),
		with(func(m *Metadata) { m.CreatedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) }),
		with(func(m *Metadata) { m.CreatedAt = at.In(time.FixedZone("far", 24*3600)) }),
		with(func(m *Metadata) { m.CreatedAt = at.In(time.FixedZone("near", 23*3600+59*60)) }),
		with(func(m *Metadata) { m.CreatedAt = at.In(time.FixedZone("west", -(3*3600 + 30*60))) }),
		with(func(m *Metadata) { m.CreatedAt = time.Unix(0, 0).UTC() }),
	}
}

// checkAppendMetadata compares AppendMetadataJSON with json.Marshal.
func checkAppendMetadata(t *testing.T, m Metadata) {
	t.Helper()
	before := m
	before.Scopes = slices.Clone(m.Scopes)
	want, wantErr := json.Marshal(m)
	got := AppendMetadataJSON([]byte("prefix"), &m)
	if !bytes.HasPrefix(got, []byte("prefix")) {
		t.Fatalf("AppendMetadataJSON(%+v) dropped dst: got %q", m, got)
	}
	got = got[len("prefix"):]
	if wantErr != nil {
		if len(got) != 0 {
			t.Fatalf("json.Marshal(%+v) fails (%v) but AppendMetadataJSON appended %q", m, wantErr, got)
		}
	} else if !bytes.Equal(got, want) {
		t.Fatalf("AppendMetadataJSON(%+v) = %s, json.Marshal gives %s", m, got, want)
	}
	if !reflect.DeepEqual(m.Scopes, before.Scopes) || m.UserID != before.UserID || m.CreatedAt != before.CreatedAt {
		t.Fatalf("AppendMetadataJSON modified its metadata: %+v, was %+v", m, before)
	}
	if wantErr == nil {
		checkDecodeMetadata(t, want)
	}
}

// sentinel is what *m holds before DecodeMetadataJSON; a failed decode must
// leave it so, a successful one must replace all of it.
var sentinel = Metadata{CorrelationID: "old", UserID: "old", Scopes: []string{"old"}, CreatedAt: time.Unix(1, 0).UTC(), CommandHash: "old"}

// checkDecodeMetadata compares DecodeMetadataJSON with json.Unmarshal into a
// zero Metadata.
func checkDecodeMetadata(t *testing.T, data []byte) {
	t.Helper()
	var want Metadata
	wantErr := json.Unmarshal(data, &want)
	got := sentinel
	got.Scopes = append([]string(nil), sentinel.Scopes...)
	in := bytes.Clone(data)
	err := DecodeMetadataJSON(in, &got)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("DecodeMetadataJSON(%q): error %v, json.Unmarshal's error %v", data, err, wantErr)
	case err != nil:
		if err.Error() != wantErr.Error() {
			t.Fatalf("DecodeMetadataJSON(%q): error %q, json.Unmarshal's error %q", data, err, wantErr)
		}
		if !reflect.DeepEqual(got, sentinel) {
			t.Fatalf("DecodeMetadataJSON(%q) failed but changed *m to %+v", data, got)
		}
	case !reflect.DeepEqual(got, want):
		t.Fatalf("DecodeMetadataJSON(%q) = %#v, json.Unmarshal gives %#v", data, got, want)
	}
	// The decoded strings must not alias data, which the caller may reuse.
	for i := range in {
		in[i] = 'X'
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeMetadataJSON(%q) kept references to its input: after overwriting it, %#v", data, got)
	}
}

var decodeCases = []string{
	`{}`, `null`, ` {}`, `{} `, `{ }`, `[]`, `""`, `1`, ``, `{`, `{}x`, `{},`,
	`{"userId":"u"}`, `{"userId":"u","userId":"v"}`, `{"userid":"u"}`, `{"USERID":"u"}`, `{"userId":"u","USERID":"v"}`,
	`{"UserID":"u"}`, `{"unknown":"x"}`, `{"unknown":{"deep":[1,2]},"userId":"u"}`,
	`{"userId":null}`, `{"scopes":null}`, `{"createdAt":null}`, `{"userId":5}`, `{"userId":true,"causationId":"c"}`,
	`{"userId":"a\"b"}`, `{"userId":"a\u0041"}`, `{"userId":"\u003c"}`, `{"userId":"\ud800"}`, `{"userId":"a\/b"}`,
	"{\"userId\":\"\xff\"}", "{\"userId\":\"a\x01\"}", "{\"userId\":\"\u2028\"}", `{"userId":"jörg"}`,
	`{"userId" : "u"}`, `{"userId":"u" }`, "{\n\"userId\":\"u\"\n}",
	`{"scopes":[]}`, `{"scopes":[""]}`, `{"scopes":["a","b"]}`, `{"scopes":["a",]}`, `{"scopes":["a"}`, `{"scopes":"a"}`,
	`{"scopes":["a"],"scopes":["b","c"]}`, `{"scopes":[1]}`, `{"scopes":["a" ,"b"]}`,
	`{"createdAt":"2024-05-17T09:30:15.123456Z"}`, `{"createdAt":"2024-05-17T09:30:15Z"}`,
	`{"createdAt":"2024-05-17T09:30:15.123456789Z"}`, `{"createdAt":"2024-05-17T09:30:15.1234567890Z"}`,
	`{"createdAt":"2024-05-17T09:30:15.000Z"}`, `{"createdAt":"2024-05-17T09:30:15.Z"}`, `{"createdAt":"2024-05-17T09:30:15,123Z"}`,
	`{"createdAt":"2024-05-17T09:30:15+05:30"}`, `{"createdAt":"2024-05-17T09:30:15-00:00"}`, `{"createdAt":"2024-05-17T09:30:15+24:00"}`,
	`{"createdAt":"2024-05-17t09:30:15z"}`, `{"createdAt":"2024-05-17 09:30:15Z"}`, `{"createdAt":"2024-13-17T09:30:15Z"}`,
	`{"createdAt":"2024-02-30T09:30:15Z"}`, `{"createdAt":"2024-05-17T24:00:00Z"}`, `{"createdAt":"2024-05-17T23:59:60Z"}`,
	`{"createdAt":"2024-05-17T9:30:15Z"}`, `{"createdAt":"0000-01-01T00:00:00Z"}`, `{"createdAt":"10000-01-01T00:00:00Z"}`,
	`{"createdAt":"-0001-01-01T00:00:00Z"}`, `{"createdAt":""}`, `{"createdAt":"x"}`, `{"createdAt":1}`,
	`{"createdAt":"2024-05-17T09:30:15\u005a"}`, `{"createdAt":"2024-05-17T09:30:15.12a4Z"}`, `{"userId`, `{"userId":"}`, `{"createdAt":"0001-01-01T00:00:00Z"}`,
	`{"partition":"default","createdAt":"2024-05-17T09:30:15.123456Z","correlationId":"c"}`,
}

func TestMetadataJSONMatchesEncodingJSON(t *testing.T) {
	for _, m := range metadataCases() {
		checkAppendMetadata(t, m)
	}
	for _, c := range decodeCases {
		checkDecodeMetadata(t, []byte(c))
	}
}

func TestAppendMetadataJSONFailure(t *testing.T) {
	m := Metadata{UserID: "u", CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := json.Marshal(m); err == nil {
		t.Fatal("json.Marshal accepts the year 10000; the test's premise is gone")
	}
	if got := AppendMetadataJSON([]byte("x"), &m); string(got) != "x" {
		t.Fatalf("AppendMetadataJSON of a year-10000 time appended %q; want nothing", got[1:])
	}
}

// TestFastPathsTaken checks that common input takes the fast paths (the
// differential tests would pass even if everything fell back to encoding/json).
func TestFastPathsTaken(t *testing.T) {
	for _, d := range benchData() {
		if _, ok := appendCompactFast(nil, d.src); !ok {
			t.Errorf("compactJSON fell back to json.Compact for the %s benchmark data", d.name)
		}
	}
	m := benchMetadata()
	m.Scopes = []string{"a", "b"}
	buf := make([]byte, 0, 1024)
	if allocs := testing.AllocsPerRun(10, func() { AppendMetadataJSON(buf, &m) }); allocs != 0 {
		t.Errorf("AppendMetadataJSON allocates %v times into a large enough buffer; it fell back to json.Marshal", allocs)
	}
	data := AppendMetadataJSON(nil, &m)
	var got Metadata
	if !decodeMetadataFast(data, &got) {
		t.Errorf("DecodeMetadataJSON fell back to json.Unmarshal for %s", data)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("the fast path decoded %s as %+v; want %+v", data, got, m)
	}
}

func FuzzMetadataJSON(f *testing.F) {
	for _, m := range metadataCases() {
		data, _ := json.Marshal(m)
		f.Add(data, m.UserID, strings.Join(m.Scopes, "|"), m.CreatedAt.Unix(), int64(m.CreatedAt.Nanosecond()), 0)
	}
	for _, c := range decodeCases {
		f.Add([]byte(c), "", "", int64(0), int64(0), 0)
	}
	f.Add([]byte(`{}`), "a<b", "x|y\u2028", int64(253402300800), int64(5), 3600)    // year 10000
	f.Add([]byte(`{}`), "ok", "", int64(1715938215), int64(123456789), 24*3600)     // zone out of range
	f.Add([]byte(`{}`), "ok", "a||b", int64(-62135596801), int64(999999999), -1800) // before year 1
	f.Fuzz(func(t *testing.T, data []byte, text, scopes string, sec, nsec int64, offset int) {
		checkDecodeMetadata(t, data)
		m := Metadata{
			CorrelationID: text,
			UserID:        strings.ToUpper(text),
			TraceState:    text + text,
			Partition:     "p",
			CreatedAt:     time.Unix(sec, nsec).In(time.FixedZone("z", offset)),
		}
		if offset == 0 {
			m.CreatedAt = m.CreatedAt.UTC()
		}
		if scopes != "" {
			m.Scopes = strings.Split(scopes, "|")
		}
		checkAppendMetadata(t, m)
		m.CreatedAt = time.Time{}
		checkAppendMetadata(t, m)
	})
}

// Benchmarks: each pairs the encoding/json code it replaces ("encoding/json")
// with the replacement ("fast").

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

func benchMetadata() Metadata {
	return Metadata{
		CorrelationID: "0190a8c4-6f1e-7c3a-9d2b-5e8f1a2b3c4d",
		CausationID:   "0190a8c4-6f1e-7c3a-9d2b-5e8f1a2b3c4e",
		UserID:        "user-42",
		Partition:     "default",
		CreatedAt:     time.Date(2024, 5, 17, 9, 30, 15, 123456000, time.UTC),
		TraceParent:   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		CommandHash:   "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
	}
}

func BenchmarkMetadataMarshal(b *testing.B) {
	m := benchMetadata()
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if len(AppendMetadataJSON(nil, &m)) == 0 {
				b.Fatal("AppendMetadataJSON failed")
			}
		}
	})
}

func BenchmarkMetadataUnmarshal(b *testing.B) {
	m := benchMetadata()
	data, _ := json.Marshal(m)
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got Metadata
			if err := json.Unmarshal(data, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got Metadata
			if err := DecodeMetadataJSON(data, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
