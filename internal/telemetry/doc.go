// Package telemetry holds the OpenTelemetry helpers that the engine packages
// (actors for aggregate streams, tagconsistency for DCB commands) share: the
// journal-call instruments and how they record, how a span is marked failed
// or rejected, and the W3C traceparent an event's metadata carries. One
// helper set, so both paths mark spans and record latencies the same way.
package telemetry
