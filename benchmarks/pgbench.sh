#!/usr/bin/env bash
# Postgres's own single-row commit rate, for comparison with the harness's
# spread scenario: pgbench runs one single-row INSERT per transaction (a row the
# size of a benchmark event) from 16 clients for 10 seconds, into a scratch
# table that is dropped afterwards. A second run adds a NOTIFY to each
# transaction, to show what a NOTIFY inside every append transaction costs
# (Postgres serializes the commits of notifying transactions): the reason the
# Postgres journal sends its wake-ups after commit, coalesced, instead.
#
#   benchmarks/pgbench.sh [URL]   (default: $SCRIBE_TEST_DATABASE_URL, then the local test database)
#
# CLIENTS, THREADS and SECONDS_TO_RUN override -c 16, -j 2 and -T 10.
set -euo pipefail
url=${1:-${SCRIBE_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}}
pgbench=${PGBENCH:-$(ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -n 1)}
[ -x "$pgbench" ] || { echo "pgbench not found; set PGBENCH=/path/to/pgbench" >&2; exit 1; }
table=bench_pgbench_scratch_$$
dir=$(mktemp -d)
trap 'psql "$url" -qc "DROP TABLE IF EXISTS $table" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
psql "$url" -qc "CREATE TABLE $table (id uuid PRIMARY KEY, tag text NOT NULL, version bigint NOT NULL, type text NOT NULL, data bytea NOT NULL, metadata bytea NOT NULL, hash bytea NOT NULL, recorded_at timestamptz NOT NULL DEFAULT now())"
insert="INSERT INTO $table (id, tag, version, type, data, metadata, hash)
VALUES (gen_random_uuid(), 'counter:' || :client_id, 1, 'Deposited',
        convert_to('{\"amount\":1,\"balance\":123456,\"seq\":123456,\"note\":\"benchmark payload padding to one hundred bytes\"}', 'UTF8'),
        convert_to('{\"partition\":\"default\"}', 'UTF8'), sha256(convert_to(random()::text, 'UTF8')));"
printf '%s\n' "$insert" >"$dir/insert.sql"
printf 'BEGIN;\n%s\nSELECT pg_notify(%s, %s);\nCOMMIT;\n' "$insert" "'${table}_channel'" "''" >"$dir/insert_notify.sql"
for script in insert insert_notify; do
	echo "== pgbench: single-row INSERT per transaction$([ $script = insert_notify ] && echo ' + NOTIFY')"
	"$pgbench" -n -f "$dir/$script.sql" -c "${CLIENTS:-16}" -j "${THREADS:-2}" -T "${SECONDS_TO_RUN:-10}" "$url" |
		grep -E '^(number of clients|duration|number of transactions actually processed|latency average|tps)'
done
