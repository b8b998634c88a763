package main

import (
	"context"
	"io"

	"github.com/scribe-es/scribe"
)

// upcastCheckArgs returns the arguments of `bank upcast check` (or its
// older name, `bank check-events`) when args (without the program name)
// names it, else nil.
func upcastCheckArgs(args []string) []string {
	switch {
	case len(args) >= 2 && args[0] == "upcast" && args[1] == "check":
		return append([]string{}, args[2:]...)
	case len(args) >= 1 && args[0] == "check-events":
		return append([]string{}, args[1:]...)
	}
	return nil
}

// runCheckEvents is `bank upcast check` (also `bank check-events`): the read
// check before a deploy, scribe.UpcastCheck with the bank's registrations.
// It decodes every stored event (or a sample per type and version) with
// this build's registrations and upcasters, prints a table by type and
// version, and exits 1 when any event does not decode, naming the first one
// of each failing type and version.
func runCheckEvents(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return scribe.UpcastCheck(ctx, scribe.UpcastCheckParams{
		Name: "bank upcast check", Args: args, Register: register,
		Getenv: getenv, Stdout: stdout, Stderr: stderr,
	})
}
