#!/usr/bin/env bash
# A retry storm on the bank over HTTP, for comparing builds side by side: for
# each run, each given bank binary serves a fresh schema on Postgres, and
# `bank loadgen -storm` (from LOADGEN, default the last binary given: older
# builds lack -storm) drives WORKERS (2000) clients depositing on ONE account,
# each attempt abandoned after TIMEOUT (50ms) and retried at once (after a 503
# a client waits BACKOFF, 50ms), for SECONDS_TO_RUN (15) seconds; its summary
# is printed on one line and the schema dropped. Binaries alternate within a
# run, so a slow spell of the machine hits both.
#
#   go build -o /tmp/bank-new ./examples/bank        # and another build to compare
#   benchmarks/bank-storm.sh /tmp/bank-old /tmp/bank-new
#
# URL (default: $SCRIBE_TEST_DATABASE_URL, then the local test database), RUNS
# (3), PORT (18081) and EXTRA (more loadgen flags, such as -send-deadline)
# override the defaults.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BANK_BINARY [BANK_BINARY…]" >&2; exit 2; }
url=${URL:-${SCRIBE_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}}
port=${PORT:-18081}
loadgen=${LOADGEN:-${!#}}
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
		schema=bench_storm_$$_$run
		log=$(mktemp)
		"$bin" -db "$url" -schema "$schema" -addr "127.0.0.1:$port" -log-level warn >"$log" 2>&1 &
		pid=$!
		for _ in $(seq 1 150); do
			curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
			kill -0 "$pid" 2>/dev/null || { echo "$bin exited:" >&2; cat "$log" >&2; exit 1; }
			sleep 0.2
		done
		# shellcheck disable=SC2086
		summary=$("$loadgen" loadgen -storm -url "http://127.0.0.1:$port" -workers "${WORKERS:-2000}" -timeout "${TIMEOUT:-50ms}" \
			-backoff "${BACKOFF:-50ms}" -duration "${SECONDS_TO_RUN:-15}s" ${EXTRA:-} 2>&1 | tr '\n' ' ') || true
		echo "run $run  $bin  $summary"
		rm -f "$log"
		cleanup
	done
done
