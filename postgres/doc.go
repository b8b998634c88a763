// Package postgres implements journal.Journal, journal.Sessions and
// snapshots.Store on PostgreSQL with pgx/v5.
package postgres
