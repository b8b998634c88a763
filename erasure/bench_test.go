package erasure_test

import (
	"testing"

	"github.com/scribe-es/scribe/erasure"
)

// BenchmarkSeal seals one field of a ~100-byte event, as the write path
// does for each event with personal data.
func BenchmarkSeal(b *testing.B) {
	key, err := erasure.NewDataKey()
	if err != nil {
		b.Fatal(err)
	}
	data := []byte(`{"amount":1,"balance":12345,"seq":678,"note":"benchmark payload padding to one hundred bytes"}`)
	p := erasure.SealParams{EventType: "Deposited", Subject: "42", Fields: []string{"note"}, Key: key}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := erasure.Seal(data, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen opens the event BenchmarkSeal seals, as recovery does.
func BenchmarkOpen(b *testing.B) {
	key, err := erasure.NewDataKey()
	if err != nil {
		b.Fatal(err)
	}
	data := []byte(`{"amount":1,"balance":12345,"seq":678,"note":"benchmark payload padding to one hundred bytes"}`)
	sealed, err := erasure.Seal(data, erasure.SealParams{EventType: "Deposited", Subject: "42", Fields: []string{"note"}, Key: key})
	if err != nil {
		b.Fatal(err)
	}
	keys := erasure.Lookup{Keys: map[string]erasure.DataKey{"42": key}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := erasure.Open(sealed, "Deposited", keys); err != nil {
			b.Fatal(err)
		}
	}
}
