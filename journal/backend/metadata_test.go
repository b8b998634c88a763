package backend

import (
	"bytes"
	"encoding/json"

	"github.com/scribe-es/scribe/journal"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The tests here hold metadata.go to encoding/json: AppendMetadataJSON to
// json.Marshal, DecodeMetadataJSON to json.Unmarshal. The tables run as the
// fuzzer's seed corpus too.

// metadataCases are metadata values for AppendMetadataJSON, including ones
// json.Marshal escapes or fails on.
func metadataCases() []journal.Metadata {
	at := time.Date(2024, 5, 17, 9, 30, 15, 123456000, time.UTC)
	full := journal.Metadata{
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
	with := func(f func(*journal.Metadata)) journal.Metadata {
		m := full
		m.Scopes = append([]string(nil), full.Scopes...)
		f(&m)
		return m
	}
	east := time.FixedZone("east", 5*3600+30*60)
	return []journal.Metadata{
		{},
		{Partition: "default"},
		{CreatedAt: at},
		{Scopes: []string{}},
		{Scopes: []string{""}},
		full,
		with(func(m *journal.Metadata) { m.UserID = "a<b>&c" }),
		with(func(m *journal.Metadata) { m.UserID = `quote " backslash \ slash /` }),
		with(func(m *journal.Metadata) { m.UserID = "ctl \x00 \x01 \b \f \n \r \t \x1f \x7f" }),
		with(func(m *journal.Metadata) { m.UserID = "jörg ✓ 😀" }),
		with(func(m *journal.Metadata) { m.UserID = "sep \u2028 \u2029" }),
		with(func(m *journal.Metadata) { m.UserID = "bad \xff \xc3\x28 \xed\xa0\x80" }),
		with(func(m *journal.Metadata) { m.Scopes = []string{"ok", "<html>"} }),
		with(func(m *journal.Metadata) { m.Scopes = []string{"x\ny"} }),
		with(func(m *journal.Metadata) { m.CommandHash = "&" }),
		with(func(m *journal.Metadata) { m.CreatedAt = at.In(east) }),
		with(func(m *journal.Metadata) { m.CreatedAt = at.Local() }),
		with(func(m *journal.Metadata) { m.CreatedAt = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) }),
		with(func(m *journal.Metadata) { m.CreatedAt = time.Date(2024, 1, 1, 0, 0, 0, 100, time.UTC) }),
		with(func(m *journal.Metadata) { m.CreatedAt = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC) }),
		with(func(m *journal.Metadata) { m.CreatedAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC) }),
		with(func(m *journal.Metadata) { m.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }),
		with(func(m *journal.Metadata) { m.CreatedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) }),
		with(func(m *journal.Metadata) { m.CreatedAt = at.In(time.FixedZone("far", 24*3600)) }),
		with(func(m *journal.Metadata) { m.CreatedAt = at.In(time.FixedZone("near", 23*3600+59*60)) }),
		with(func(m *journal.Metadata) { m.CreatedAt = at.In(time.FixedZone("west", -(3*3600 + 30*60))) }),
		with(func(m *journal.Metadata) { m.CreatedAt = time.Unix(0, 0).UTC() }),
	}
}

// checkAppendMetadata compares AppendMetadataJSON with json.Marshal.
func checkAppendMetadata(t *testing.T, m journal.Metadata) {
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
var sentinel = journal.Metadata{CorrelationID: "old", UserID: "old", Scopes: []string{"old"}, CreatedAt: time.Unix(1, 0).UTC(), CommandHash: "old"}

// checkDecodeMetadata compares DecodeMetadataJSON with json.Unmarshal into a
// zero Metadata.
func checkDecodeMetadata(t *testing.T, data []byte) {
	t.Helper()
	var want journal.Metadata
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
	m := journal.Metadata{UserID: "u", CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := json.Marshal(m); err == nil {
		t.Fatal("json.Marshal accepts the year 10000; the test's premise is gone")
	}
	if got := AppendMetadataJSON([]byte("x"), &m); string(got) != "x" {
		t.Fatalf("AppendMetadataJSON of a year-10000 time appended %q; want nothing", got[1:])
	}
}

func TestMetadataFastPathsTaken(t *testing.T) {
	m := benchMetadata()
	m.Scopes = []string{"a", "b"}
	buf := make([]byte, 0, 1024)
	if allocs := testing.AllocsPerRun(10, func() { AppendMetadataJSON(buf, &m) }); allocs != 0 {
		t.Errorf("AppendMetadataJSON allocates %v times into a large enough buffer; it fell back to json.Marshal", allocs)
	}
	data := AppendMetadataJSON(nil, &m)
	var got journal.Metadata
	if !decodeMetadataFast(data, &got) {
		t.Errorf("DecodeMetadataJSON fell back to json.Unmarshal for %s", data)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("the fast path decoded %s as %+v; want %+v", data, got, m)
	}
}

// The runtime's metadata is often createdAt alone: decoding it copies
// nothing, and metadata with string fields copies its text once.
func TestDecodeMetadataAllocations(t *testing.T) {
	for _, c := range []struct {
		data   string
		allocs float64
	}{
		{`{"createdAt":"2026-11-28T12:00:00.123456Z"}`, 0},
		{`{"correlationId":"c","createdAt":"2026-11-28T12:00:00Z","scopes":["a","b"]}`, 3}, // the text, and the scopes slice grown once
		{`{"userId":"u","causationId":"x"}`, 1},
	} {
		data := []byte(c.data)
		var m journal.Metadata
		if got := testing.AllocsPerRun(20, func() { m = journal.Metadata{}; _ = DecodeMetadataJSON(data, &m) }); got != c.allocs {
			t.Errorf("DecodeMetadataJSON(%s) allocates %v times, want %v", data, got, c.allocs)
		}
		checkDecodeMetadata(t, data)
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
		m := journal.Metadata{
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

func benchMetadata() journal.Metadata {
	return journal.Metadata{
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
			var got journal.Metadata
			if err := json.Unmarshal(data, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got journal.Metadata
			if err := DecodeMetadataJSON(data, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
