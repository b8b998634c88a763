package erasure_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/scribe-es/scribe/erasure"
)

// Seal a personal field, open it, erase the subject, open it again: the
// field is gone, and sealing for the subject is refused.
func Example() {
	ctx := context.Background()
	keys := erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{})

	key, _ := keys.DataKey(ctx, "c-42")
	data := []byte(`{"customerId":"c-42","name":"Alice Example"}`)
	sealed, _ := erasure.Seal(data, erasure.SealParams{EventType: "CustomerRegistered", Subject: "c-42", Fields: []string{"name"}, Key: key})
	fmt.Println("stored in clear:", strings.Contains(string(sealed), "Alice"))

	look, _ := keys.Lookup(ctx, []string{"c-42"})
	opened, _ := erasure.Open(sealed, "CustomerRegistered", look)
	fmt.Println(string(opened.Data))

	_, _ = keys.BeginErasure(ctx, "c-42", "dpo") // erasure.Erase runs every step; the key is refused from this one on
	look, _ = keys.Lookup(ctx, []string{"c-42"})
	opened, _ = erasure.Open(sealed, "CustomerRegistered", look)
	fmt.Println(string(opened.Data), opened.Erased)

	_, err := keys.DataKey(ctx, "c-42")
	fmt.Println(errors.Is(err, erasure.ErrSubjectErased))
	// Output:
	// stored in clear: false
	// {"customerId":"c-42","name":"Alice Example"}
	// {"customerId":"c-42"} [name]
	// true
}
