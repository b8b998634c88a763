// Command shop is the first-week example: a stock aggregate per product with
// typed commands (runtime.AggregateOf), an
// order placed by a DCB command over several products that decides from the
// products' own states (runtime.Uses), an orders read model written once for
// the memory store and Postgres (projection.RowProjection), and lease-free
// state reads (runtime.State). The same code runs on memory (default) and on
// Postgres (-db URL), wired by one call (scribe.Open); shop.go holds all of
// it, shop_test.go tests its rules with the test kit (package scribetest).
// history.go reads the events of the shop's first release, a renamed type
// and a split one, through upcasters (runtime.RegisterEventUpcaster);
// history_test.go stores such events and runs this build on them.
//
//	go run ./examples/shop                       # in memory
//	go run ./examples/shop -db postgres://postgres@127.0.0.1:5432/test?sslmode=disable
package main
