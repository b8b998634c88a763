// Package pgschema holds what the postgres packages (the journal's adapters
// in postgres and the operator tooling in postgres/pgadmin) share about one
// Scribe schema: its schema-qualified SQL, its advisory lock keys, and the
// translation of driver errors to the journal's sentinels at the boundary.
package pgschema
