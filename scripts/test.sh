#!/usr/bin/env bash
# The project's test command (run it as `make test`): go vet, a gofmt check and
# `go test -race ./...` against a real PostgreSQL. Arguments are passed to
# go test (before ./...), e.g. `./scripts/test.sh -run TestMemory -v`.
#
# Postgres: SCRIBE_TEST_DATABASE_URL wins when set. Otherwise a server answering
# on 127.0.0.1:5432 (database "test", trust auth) is used. Otherwise (or always,
# with SCRIBE_TEST_THROWAWAY_PG=1) a throwaway cluster is created with the
# installed server binaries (the newest /usr/lib/postgresql/*/bin, else initdb
# on PATH): initdb into a temporary directory (as user postgres, or nobody,
# when run as root; initdb refuses root), started on a free port from 55432,
# used, then stopped and deleted on every exit: success, failure, Ctrl-C or
# kill (not kill -9). A signal to this script is passed on to the running
# tests, so no test outlives the cluster.
#
# NATS (projection/natssink): a server answering on 127.0.0.1:4222 is used
# (with JetStream enabled). Otherwise nats-server (on PATH or /usr/sbin) is
# started with JetStream on 127.0.0.1:4222, its store in a temporary
# directory, and stopped (by its PID) and deleted on exit. Without one the
# NATS tests skip loudly, or fail when SCRIBE_REQUIRE_POSTGRES=1.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '== %s\n' "$*" >&2; }

cleanup_cmds=()
cleanup() {
	local c
	# ${a[@]+...}: an empty array is "unbound" to bash before 4.4 (macOS).
	for c in ${cleanup_cmds[@]+"${cleanup_cmds[@]}"}; do eval "$c" || true; done
}
trap cleanup EXIT

port_answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_throwaway_postgres starts a cluster and exports SCRIBE_TEST_DATABASE_URL.
# It runs as an `if` condition, where `set -e` does not apply: every step
# checks its own failure.
start_throwaway_postgres() {
	local bindir
	bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
	if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
		# initdb on PATH, symlinks resolved (Debian links only some tools).
		local initdb
		initdb=$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)
		bindir=$(dirname "$(readlink -f "$initdb" 2>/dev/null || echo "$initdb")")
	fi
	local tool
	for tool in initdb pg_ctl createdb; do
		if [ ! -x "$bindir/$tool" ]; then
			log "no PostgreSQL server binaries found (looked for /usr/lib/postgresql/*/bin and initdb, pg_ctl, createdb on PATH); install them (apt-get install postgresql) or set SCRIBE_TEST_DATABASE_URL"
			return 1
		fi
	done
	local port=55432
	while port_answers "$port"; do port=$((port + 1)); done
	local dir
	dir=$(mktemp -d /tmp/scribe-pg.XXXXXX) || return 1
	local run=()
	if [ "$(id -u)" = 0 ]; then
		# initdb refuses to run as root: run the cluster as an unprivileged user.
		local user=postgres
		id "$user" >/dev/null 2>&1 || user=nobody
		local runuser
		runuser=$(PATH="$PATH:/usr/sbin:/sbin" command -v runuser) || {
			log "running as root needs runuser (util-linux) to start PostgreSQL as user $user; run as a non-root user or set SCRIBE_TEST_DATABASE_URL"
			rm -rf "$dir"
			return 1
		}
		chown "$user" "$dir" || { rm -rf "$dir"; return 1; }
		run=("$runuser" -u "$user" --)
	fi
	chmod 755 "$dir" || { rm -rf "$dir"; return 1; }
	# Registered before anything starts, so an interrupted start is cleaned up too.
	# pg_ctl stop fails harmlessly when no server runs; it waits for the stop.
	cleanup_cmds+=("(cd / && ${run[*]:-} '$bindir/pg_ctl' -D '$dir/data' -m immediate stop >/dev/null 2>&1); rm -rf '$dir'")
	log "starting a throwaway PostgreSQL ($bindir) in $dir on port $port"
	# The server tools run from $dir: the unprivileged user may not be able to
	# enter the current directory.
	(cd "$dir" && ${run[@]+"${run[@]}"} "$bindir/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1) ||
		{ log "initdb failed:"; cat "$dir/initdb.log" >&2; return 1; }
	(cd "$dir" && ${run[@]+"${run[@]}"} "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off" start >/dev/null) ||
		{ log "PostgreSQL did not start:"; cat "$dir/server.log" >&2; return 1; }
	(cd "$dir" && ${run[@]+"${run[@]}"} "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres test) ||
		{ log "createdb test failed"; return 1; }
	export SCRIBE_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/test?sslmode=disable"
}

# start_nats starts a throwaway nats-server with JetStream on 127.0.0.1:4222.
start_nats() {
	local bin
	bin=$(PATH="$PATH:/usr/sbin:/usr/local/sbin" command -v nats-server) || {
		log "no nats-server found (install it: apt-get install nats-server); the NATS tests will skip"
		return 1
	}
	local dir
	dir=$(mktemp -d /tmp/scribe-nats.XXXXXX) || return 1
	"$bin" -js -a 127.0.0.1 -p 4222 -sd "$dir" >"$dir/server.log" 2>&1 &
	local pid=$!
	cleanup_cmds+=("kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf '$dir'")
	log "starting a throwaway nats-server -js ($bin, pid $pid) on 127.0.0.1:4222, store in $dir"
	local i
	for i in $(seq 1 50); do
		if port_answers 4222; then return 0; fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	log "nats-server did not start:"
	cat "$dir/server.log" >&2
	return 1
}

# run_tests runs "$@" in its own process group and waits for it. Ctrl-C,
# SIGTERM or SIGHUP to this script is passed on to that whole group (go test
# and the test binaries it started), and the script exits only after they
# did, so the EXIT trap never removes the cluster under running tests.
run_tests() {
	local pid rc=0 sig=
	set -m
	"$@" &
	pid=$!
	set +m
	trap 'sig=INT; kill -INT -- -'"$pid"' 2>/dev/null || true' INT
	trap 'sig=TERM; kill -TERM -- -'"$pid"' 2>/dev/null || true' TERM
	trap 'sig=HUP; kill -HUP -- -'"$pid"' 2>/dev/null || true' HUP
	# wait returns early (status > 128) when a trapped signal arrives; wait
	# again until the tests have really exited.
	while :; do
		rc=0
		wait "$pid" || rc=$?
		kill -0 "$pid" 2>/dev/null || break
	done
	trap - INT TERM HUP
	if [ -n "$sig" ]; then
		log "interrupted by SIG$sig"
		exit $((128 + $(kill -l "$sig")))
	fi
	return "$rc"
}

if [ -z "${SCRIBE_TEST_DATABASE_URL:-}" ]; then
	if [ "${SCRIBE_TEST_THROWAWAY_PG:-}" != 1 ] && port_answers 5432; then
		export SCRIBE_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
		log "using the PostgreSQL on 127.0.0.1:5432"
	elif ! start_throwaway_postgres; then
		if [ "${SCRIBE_REQUIRE_POSTGRES:-}" = 1 ] || [ "${SCRIBE_TEST_THROWAWAY_PG:-}" = 1 ]; then
			log "no PostgreSQL could be found or started (SCRIBE_REQUIRE_POSTGRES or SCRIBE_TEST_THROWAWAY_PG is 1)"
			exit 1
		fi
		log "WARNING: no PostgreSQL: Postgres tests will be skipped"
	fi
fi

if [ -z "${SCRIBE_TEST_NATS_URL:-}" ] && ! port_answers 4222; then
	if ! start_nats && [ "${SCRIBE_REQUIRE_POSTGRES:-}" = 1 ]; then
		log "no NATS server could be found or started (SCRIBE_REQUIRE_POSTGRES is 1)"
		exit 1
	fi
elif [ -z "${SCRIBE_TEST_NATS_URL:-}" ]; then
	log "using the NATS server on 127.0.0.1:4222"
fi

log "go vet"
go vet ./...

log "gofmt"
gofiles=()
while IFS= read -r f; do
	if [ -f "$f" ]; then gofiles+=("$f"); fi
done < <(git ls-files --cached --others --exclude-standard -- '*.go' 2>/dev/null ||
	find . -name '*.go' -not -path './vendor/*' -not -path '*/testdata/*')
if [ "${#gofiles[@]}" -gt 0 ]; then
	unformatted=$(gofmt -l "${gofiles[@]}")
	if [ -n "$unformatted" ]; then
		printf 'gofmt would change these files (run gofmt -w):\n%s\n' "$unformatted" >&2
		exit 1
	fi
fi

log "go test -race ./... (SCRIBE_TEST_DATABASE_URL=${SCRIBE_TEST_DATABASE_URL:-unset})"
run_tests go test -race -count=1 -timeout 30m "$@" ./...
