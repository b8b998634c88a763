// Package usercode runs a service's own functions (an aggregate's Decide and
// Evolve, a codec, a DCB command's Initial, FromStates, Evolve and Decide)
// for both engines, turning a panic into the one error a service matches:
// runtime.PanicError (an alias of PanicError) and runtime.ErrPanic.
package usercode
