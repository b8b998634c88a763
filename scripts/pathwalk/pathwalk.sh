#!/usr/bin/env bash
# pathwalk.sh [REV]: the files one aggregate command and one DCB command
# (raw form with FromStates) enter on their way from package runtime to the
# journal, in call order, with how often each path returns to a file it left.
# It instruments a throwaway worktree of REV (default HEAD): every function of
# runtime, actors, tagconsistency and journal records its entry while the
# command runs (after warm-up: actors active, heads known, Postgres journal).
# Needs Postgres at $SCRIBE_TEST_DATABASE_URL. Interleaves the actor's
# goroutine with its I/O goroutine, as the command does.
set -euo pipefail
rev=${1:-HEAD}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'git -C "$repo" worktree remove --force "$tmp/wt" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git -C "$repo" worktree add -q --detach "$tmp/wt" "$rev"
cd "$tmp/wt"
mkdir -p internal/walk
cp "$here/walk.go.txt" internal/walk/walk.go
python3 "$here/instrument.py"
cp "$here/walk_test.go.txt" runtime/zz_pathwalk_test.go
SCRIBE_TEST_DATABASE_URL=${SCRIBE_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable} \
	go test -count=1 -run TestZZWalkRaw -v ./runtime/ | grep -A3 'files,'
