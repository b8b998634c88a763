// Package pgtrace records OpenTelemetry client spans of the statements a pgx
// connection runs (Tracer), after the semantic conventions for database
// spans. postgres.Open and postgres.Connect set it on the pools they create
// (postgres.Config.TracerProvider); set it yourself on a pool of your own.
package pgtrace
