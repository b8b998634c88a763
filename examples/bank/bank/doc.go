// Package bank is the domain of the Scribe bank example: accounts as
// event-sourced aggregates and transfers as Dynamic Consistency Boundary (DCB)
// decisions over two accounts.
//
// Everything here is pure: validation of account IDs and amounts, the account
// aggregate's Decide and Evolve, the transfer state built from the events of
// both accounts and its decision, and the typed domain errors with the stable
// codes the HTTP API returns. Nothing in this package does I/O or knows about
// actors, HTTP or the journal's storage; the service in package main wires it to
// the Scribe runtime.
//
// Money is an int64 number of minor units (cents). A single amount is between
// MinAmount and MaxAmount; a balance never goes below zero and never above
// MaxBalance.
//
// Every event of an account carries the tag "account:<id>" (see AccountTag), so
// an account's stream is the tag stream of that tag. A transfer is one
// MoneyTransferred event tagged with both accounts: it sits in both account
// streams, and each account's Evolve applies its own side.
package bank
