// Package backoff is Scribe's one way to pause before trying again: Sleep
// waits a duration unless a context ends first, and Backoff yields the
// pauses of a retry loop, doubling from Min up to Max, optionally jittered.
// Every loop of the module that retries or polls with a growing pause uses
// it, so the cap and the cancellation are written once.
package backoff
