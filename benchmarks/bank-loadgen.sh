#!/usr/bin/env bash
# The bank example under its load generator on Postgres, for comparing builds
# side by side: for each run, each given bank binary serves a fresh schema,
# `bank loadgen` drives 32 workers of random transfers between 100 accounts
# for 10 seconds, and its summary (transfers/s, latency percentiles, the
# invariant check) is printed on one line; the schema and its key store's
# schema are dropped afterwards.
# Binaries alternate within a run, so a slow spell of the machine hits both.
#
#   go build -o /tmp/bank-new ./examples/bank        # and another build to compare
#   benchmarks/bank-loadgen.sh /tmp/bank-old /tmp/bank-new
#
# URL (default: $SCRIBE_TEST_DATABASE_URL, then the local test database), RUNS
# (3), SECONDS_TO_RUN (10), WORKERS (32), ACCOUNTS (100) and PORT (18080)
# override the defaults.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BANK_BINARY [BANK_BINARY…]" >&2; exit 2; }
url=${URL:-${SCRIBE_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}}
port=${PORT:-18080}
pid=
schema=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	[ -n "$schema" ] && psql "$url" -qc "DROP SCHEMA IF EXISTS $schema CASCADE; DROP SCHEMA IF EXISTS ${schema}_keys CASCADE" >/dev/null 2>&1 || true
	pid= schema=
}
trap cleanup EXIT
for run in $(seq 1 "${RUNS:-3}"); do
	for bin in "$@"; do
		schema=bench_bank_$$_$run
		log=$(mktemp)
		"$bin" -db "$url" -schema "$schema" -addr "127.0.0.1:$port" -log-level warn >"$log" 2>&1 &
		pid=$!
		for _ in $(seq 1 150); do
			curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
			kill -0 "$pid" 2>/dev/null || { echo "$bin exited:" >&2; cat "$log" >&2; exit 1; }
			sleep 0.2
		done
		summary=$("$bin" loadgen -url "http://127.0.0.1:$port" -workers "${WORKERS:-32}" -accounts "${ACCOUNTS:-100}" \
			-duration "${SECONDS_TO_RUN:-10}s" 2>/dev/null | grep -E '^(transfers:|latency|invariants)' | tr '\n' ' ')
		echo "run $run  $bin  $summary"
		rm -f "$log"
		cleanup
	done
done
