package scribe_test

import (
	"context"
	"fmt"
	"log"

	"github.com/scribe-es/scribe"
	"github.com/scribe-es/scribe/runtime"
)

// The code the docs' erasure section shows: personal data declared with
// its event type, sealed in the journal, erased on request.
type (
	Customer struct {
		ID, Name, Email string
	}
	CustomerCommand interface{ customerCommand() }
	Register        struct{ ID, Name, Email string }
	// CustomerRegistered holds personal data: its name and email are
	// sealed under the key of the subject in customerId.
	CustomerRegistered struct {
		ID    string `json:"customerId"`
		Name  string `json:"name"`
		Email string `json:"email"`
	}
)

func (Register) customerCommand() {}

var customerAggregate = runtime.AggregateOf[Customer, CustomerCommand]{
	Name:    "customer",
	Initial: func() Customer { return Customer{} },
	Decide: func(_ Customer, cmd CustomerCommand) ([]any, error) {
		switch c := cmd.(type) {
		case Register:
			return []any{CustomerRegistered(c)}, nil
		}
		return nil, fmt.Errorf("no rule for %T", cmd)
	},
	Evolve: func(c Customer, ev any) Customer {
		if e, ok := ev.(CustomerRegistered); ok {
			c = Customer(e)
		}
		return c
	},
}

// eraseCustomer registers a customer and erases them.
func eraseCustomer(ctx context.Context, url string) error {
	svc, err := scribe.Open(ctx, scribe.Config{DatabaseURL: url, NodeID: "crm-1"}) // the key store too
	if err != nil {
		return err
	}
	defer svc.Close(context.WithoutCancel(ctx))
	runtime.MustRegisterEvent[CustomerRegistered](svc.Runtime, "CustomerRegistered", 1, runtime.WithPersonalData(runtime.PersonalData{
		Fields:       []string{"name", "email"}, // top-level JSON names
		SubjectField: "customerId",              // or SubjectTagGroup: "customer" (tag customer:42 → subject "42")
	}))
	customers := runtime.MustRegisterAggregateOf(svc.Runtime, customerAggregate)
	if _, err := customers.Execute(ctx, "c-42", Register{ID: "c-42", Name: "Ada", Email: "ada@example.com"}); err != nil {
		return err
	}
	e, err := svc.Runtime.Erase(ctx, "c-42", "ticket-1234") // who asked; repeat-safe
	if err != nil {
		return err
	}
	st, err := customers.State(ctx, "c-42")
	if err != nil {
		return err
	}
	fmt.Printf("erased %s by %s: name %q, email %q\n", e.Subject, e.By, st.State.Name, st.State.Email)
	return nil
}

// Personal data is sealed under its subject's key; erasing the subject
// destroys the key, and the fields read as zero values.
func Example_erasure() {
	if err := eraseCustomer(context.Background(), ""); err != nil { // "": in memory
		log.Fatal(err)
	}
	// Output:
	// erased c-42 by ticket-1234: name "", email ""
}
