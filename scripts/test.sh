#!/usr/bin/env bash
# The project's test command (run it as `make test`): go vet, a gofmt check and
# `go test -race ./...` against a real PostgreSQL.
#
# Postgres: SCRIBE_TEST_DATABASE_URL wins when set. Otherwise a server answering
# on 127.0.0.1:5432 (database "test", trust auth) is used. Otherwise a throwaway
# cluster is created (forced by SCRIBE_TEST_THROWAWAY_PG=1) with the installed server packages (initdb into a temporary
# directory as a non-root user, on a free port), used, stopped and deleted.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '== %s\n' "$*" >&2; }

cleanup_cmds=()
cleanup() {
	local c
	for c in "${cleanup_cmds[@]}"; do eval "$c" || true; done
}
trap cleanup EXIT

port_answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_throwaway_postgres() {
	local bindir
	bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
	if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
		log "no PostgreSQL server packages found (looked for /usr/lib/postgresql/*/bin/initdb); install them (apt-get install postgresql) or set SCRIBE_TEST_DATABASE_URL"
		return 1
	fi
	local port=55432
	while port_answers "$port"; do port=$((port + 1)); done
	local dir
	dir=$(mktemp -d /tmp/scribe-pg.XXXXXX)
	chmod 755 "$dir"
	local run=()
	if [ "$(id -u)" = 0 ]; then
		# initdb refuses to run as root: run the cluster as an unprivileged user.
		local user=postgres
		id "$user" >/dev/null 2>&1 || user=nobody
		chown "$user" "$dir"
		run=(runuser -u "$user" --)
	fi
	log "starting a throwaway PostgreSQL ($bindir) in $dir on port $port"
	"${run[@]}" "$bindir/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; return 1; }
	cleanup_cmds+=("${run[*]:-} '$bindir/pg_ctl' -D '$dir/data' -m immediate stop >/dev/null 2>&1; rm -rf '$dir'")
	"${run[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off" start >/dev/null ||
		{ cat "$dir/server.log" >&2; return 1; }
	"${run[@]}" "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres test
	export SCRIBE_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/test?sslmode=disable"
}

if [ -z "${SCRIBE_TEST_DATABASE_URL:-}" ]; then
	if [ "${SCRIBE_TEST_THROWAWAY_PG:-}" != 1 ] && port_answers 5432; then
		export SCRIBE_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
		log "using the PostgreSQL on 127.0.0.1:5432"
	elif ! start_throwaway_postgres; then
		if [ "${SCRIBE_REQUIRE_POSTGRES:-}" = 1 ]; then
			log "SCRIBE_REQUIRE_POSTGRES=1 but no PostgreSQL could be found or started"
			exit 1
		fi
		log "WARNING: no PostgreSQL: Postgres tests will be skipped"
	fi
fi

log "go vet"
go vet ./...

log "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './vendor/*'))
if [ -n "$unformatted" ]; then
	printf 'gofmt would change these files (run gofmt -w):\n%s\n' "$unformatted" >&2
	exit 1
fi

log "go test -race ./... (SCRIBE_TEST_DATABASE_URL=${SCRIBE_TEST_DATABASE_URL:-unset})"
go test -race -count=1 -timeout 30m "$@" ./...
