// Package runtime is Scribe's public entry point: Config, New, Register,
// Execute and Shutdown. A Go service embeds one Runtime, registers aggregate
// definitions and DCB commands, and calls Execute; the runtime routes each
// command to the single actor that owns its stream.
package runtime
