package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/scribe-es/scribe/journal"
)

var _ journal.TypeRegistry = (*Journal)(nil)

const (
	// recordSchemasSQL inserts the schemas, or locks and returns the
	// recorded ones (DO UPDATE of an unchanged column: it waits for a
	// concurrent recording of the same type version and returns its row).
	recordSchemasSQL = `INSERT INTO __S__.event_schemas AS s (type, version, schema)
		SELECT * FROM unnest($1::text[], $2::integer[], $3::jsonb[])
		ON CONFLICT (type, version) DO UPDATE SET type = s.type
		RETURNING s.type, s.version, s.schema::text`
	recordBuildSQL = `INSERT INTO __S__.event_type_builds (build, node, writes, reads) VALUES ($1, $2, $3, $4)
		ON CONFLICT (build) DO UPDATE SET node = EXCLUDED.node, writes = EXCLUDED.writes, reads = EXCLUDED.reads, last_recorded_at = now()`
	recordedSchemasSQL = `SELECT type, version, schema::text, recorded_at FROM __S__.event_schemas ORDER BY type, version`
	recordedBuildsSQL  = `SELECT build, node, writes, reads, first_recorded_at, last_recorded_at FROM __S__.event_type_builds ORDER BY build`
	// storedVersionsSQL: the type versions of the events by a loose index
	// scan of events_type_version, one probe per type version.
	storedVersionsSQL = `WITH RECURSIVE v AS (
			(SELECT type, schema_version FROM __S__.events ORDER BY type, schema_version LIMIT 1)
			UNION ALL
			SELECT n.type, n.schema_version FROM v, LATERAL (SELECT e.type, e.schema_version FROM __S__.events e
				WHERE (e.type, e.schema_version) > (v.type, v.schema_version) ORDER BY e.type, e.schema_version LIMIT 1) n)
		SELECT type, schema_version FROM v`
	// countStoredVersionsSQL counts by an index-only scan of
	// events_type_version.
	countStoredVersionsSQL = `SELECT type, schema_version, count(*) FROM __S__.events GROUP BY type, schema_version ORDER BY type, schema_version`
)

// typeVersionJSON is a journal.TypeVersion in the builds' jsonb columns.
type typeVersionJSON struct {
	Type    string `json:"type"`
	Version int    `json:"version"`
}

func typeVersionsJSON(in []journal.TypeVersion) ([]byte, error) {
	in = slices.Clone(in)
	slices.SortFunc(in, journal.CompareTypeVersions)
	out := make([]typeVersionJSON, 0, len(in))
	for _, tv := range slices.Compact(in) {
		out = append(out, typeVersionJSON(tv))
	}
	return json.Marshal(out)
}

// RecordTypes implements journal.TypeRegistry in one transaction. On a
// replica it fails with ErrReplicaReadOnly: record on the primary.
func (j *Journal) RecordTypes(ctx context.Context, schemas []journal.TypeSchema, build journal.BuildTypes) error {
	if err := j.checkOpen(); err != nil {
		return err
	}
	if err := j.writable("RecordTypes"); err != nil {
		return err
	}
	if build.Build == "" {
		return fmt.Errorf("%w: postgres: RecordTypes needs BuildTypes.Build; name the build", journal.ErrInvalidEvent)
	}
	schemas = slices.Clone(schemas)
	slices.SortFunc(schemas, func(a, b journal.TypeSchema) int { return journal.CompareTypeVersions(a.TypeVersion, b.TypeVersion) })
	given := make(map[journal.TypeVersion]json.RawMessage, len(schemas))
	var types []string
	var versions []int32
	var docs []string
	for _, s := range schemas {
		var obj map[string]any
		switch {
		case s.Type == "" || s.Version < 1:
			return fmt.Errorf("%w: postgres: a recorded schema needs a type and a version ≥ 1 (got %q v%d)", journal.ErrInvalidEvent, s.Type, s.Version)
		case json.Unmarshal(s.Schema, &obj) != nil || obj == nil:
			return fmt.Errorf("%w: postgres: the schema of %s is not a JSON object; give a JSON Schema document", journal.ErrInvalidEvent, s.TypeVersion)
		}
		if _, dup := given[s.TypeVersion]; dup {
			return fmt.Errorf("%w: postgres: RecordTypes got %s twice; give each type version once", journal.ErrInvalidEvent, s.TypeVersion)
		}
		given[s.TypeVersion] = s.Schema
		types, versions, docs = append(types, s.Type), append(versions, int32(s.Version)), append(docs, string(s.Schema))
	}
	writes, err := typeVersionsJSON(build.Writes)
	if err != nil {
		return err
	}
	reads, err := typeVersionsJSON(build.Reads)
	if err != nil {
		return err
	}
	var conflict *journal.TypeConflictError
	err = pgx.BeginTxFunc(ctx, j.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, j.sql(recordSchemasSQL), types, versions, docs)
		if err != nil {
			return err
		}
		for rows.Next() {
			var tv journal.TypeVersion
			var recorded string
			if err := rows.Scan(&tv.Type, &tv.Version, &recorded); err != nil {
				rows.Close()
				return err
			}
			if conflict == nil && !journal.SameSchema(json.RawMessage(recorded), given[tv]) {
				conflict = &journal.TypeConflictError{TypeVersion: tv, Recorded: json.RawMessage(recorded), Given: given[tv]}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if conflict != nil {
			return conflict // rolls back
		}
		_, err = tx.Exec(ctx, j.sql(recordBuildSQL), build.Build, build.Node, writes, reads)
		return err
	})
	if conflict != nil {
		return conflict
	}
	return j.translate("record types", err)
}

// RecordedTypes implements journal.TypeRegistry.
func (j *Journal) RecordedTypes(ctx context.Context) (journal.RecordedTypes, error) {
	var out journal.RecordedTypes
	err := j.inspect(ctx, "recorded types", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, j.sql(recordedSchemasSQL))
		if err != nil {
			return err
		}
		for rows.Next() {
			var s journal.TypeSchema
			var doc string
			if err := rows.Scan(&s.Type, &s.Version, &doc, &s.RecordedAt); err != nil {
				rows.Close()
				return err
			}
			s.Schema, s.RecordedAt = json.RawMessage(doc), s.RecordedAt.UTC()
			out.Schemas = append(out.Schemas, s)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, j.sql(recordedBuildsSQL))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var b journal.BuildTypes
			var writes, reads []typeVersionJSON
			if err := rows.Scan(&b.Build, &b.Node, &writes, &reads, &b.FirstRecordedAt, &b.LastRecordedAt); err != nil {
				return err
			}
			for _, w := range writes {
				b.Writes = append(b.Writes, journal.TypeVersion(w))
			}
			for _, r := range reads {
				b.Reads = append(b.Reads, journal.TypeVersion(r))
			}
			b.FirstRecordedAt, b.LastRecordedAt = b.FirstRecordedAt.UTC(), b.LastRecordedAt.UTC()
			out.Builds = append(out.Builds, b)
		}
		return rows.Err()
	})
	return out, err
}

// StoredVersions implements journal.TypeRegistry: a loose index scan, one
// index probe per stored type version.
func (j *Journal) StoredVersions(ctx context.Context) ([]journal.TypeVersion, error) {
	var out []journal.TypeVersion
	err := j.inspect(ctx, "stored type versions", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, j.sql(storedVersionsSQL))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var tv journal.TypeVersion
			if err := rows.Scan(&tv.Type, &tv.Version); err != nil {
				return err
			}
			out = append(out, tv)
		}
		return rows.Err()
	})
	slices.SortFunc(out, journal.CompareTypeVersions)
	return out, err
}

// CountStoredVersions implements journal.TypeRegistry: an index-only scan of
// every event's index entry.
func (j *Journal) CountStoredVersions(ctx context.Context) ([]journal.StoredVersion, error) {
	var out []journal.StoredVersion
	err := j.inspect(ctx, "count stored type versions", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, j.sql(countStoredVersionsSQL))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s journal.StoredVersion
			var n int64
			if err := rows.Scan(&s.Type, &s.Version, &n); err != nil {
				return err
			}
			s.Count = uint64(n)
			out = append(out, s)
		}
		return rows.Err()
	})
	slices.SortFunc(out, func(a, b journal.StoredVersion) int { return journal.CompareTypeVersions(a.TypeVersion, b.TypeVersion) })
	return out, err
}
