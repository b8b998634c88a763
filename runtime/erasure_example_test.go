package runtime_test

import (
	"context"
	"fmt"
	"log"

	"github.com/scribe-es/scribe/erasure"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/runtime"
)

// A customer's name is personal data: sealed in the journal, readable until
// the customer is erased, then a zero value, while the chain still verifies.
func ExampleWithPersonalData() {
	ctx := context.Background()
	j := memory.New()
	rt, err := runtime.New(ctx, runtime.Config{Journal: j, NodeID: "example", KeyStore: erasure.NewMemoryKeyStore(erasure.MemoryKeyStoreConfig{})})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = rt.Shutdown(ctx) }()
	_ = runtime.RegisterEvent[CustomerRegistered](rt, "CustomerRegistered", 1,
		runtime.WithPersonalData(runtime.PersonalData{Fields: []string{"name", "email"}, SubjectField: "customerId"}))
	_ = runtime.RegisterEvent[NoteAdded](rt, "NoteAdded", 1)
	_ = runtime.RegisterAggregate(rt, customerAggregate())

	target := runtime.Target{Aggregate: "customer", ID: "c-42"}
	if _, err := rt.Execute(ctx, target, RegisterCustomer{ID: "c-42", Name: "Alice Example", Email: "alice@example.com"}); err != nil {
		log.Fatal(err)
	}
	st, _ := runtime.State[Customer](ctx, rt, target)
	fmt.Println("before:", st.State.Name)

	if _, err := rt.Erase(ctx, "c-42", "dpo"); err != nil {
		log.Fatal(err)
	}
	st, _ = runtime.State[Customer](ctx, rt, target)
	fmt.Printf("after: %q, version %d\n", st.State.Name, st.Version)
	for d, err := range rt.Decoding(j.ReadStream(ctx, target.Stream(), 1, 0)) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("erased fields:", d.Erased)
	}
	n, err := journal.VerifyStream(ctx, j, target.Stream())
	fmt.Println("verified:", n, err)
	// Output:
	// before: Alice Example
	// after: "", version 1
	// erased fields: [email name]
	// verified: 1 <nil>
}
