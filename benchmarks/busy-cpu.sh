#!/usr/bin/env bash
# Runs a command and prints how many CPU-seconds the whole machine was busy
# (user, nice, system, irq, softirq and steal jiffies of /proc/stat, every
# core) and idle while it ran, and the wall time: with `/usr/bin/time` around
# the measured process, what the rest of the machine (Postgres, a load
# generator) spent is the difference. Linux only.
#
#   benchmarks/busy-cpu.sh /usr/bin/time -f "bench_user=%U bench_sys=%S" \
#     go run ./benchmarks -db URL -scenario transfer -mode actor -writers 64 -duration 10s -runs 1 -warmup 0
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 COMMAND [ARG…]" >&2; exit 2; }
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat; }
read -r b0 i0 < <(busy)
t0=$(date +%s.%N)
status=0
"$@" || status=$?
read -r b1 i1 < <(busy)
t1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
awk -v b="$((b1 - b0))" -v i="$((i1 - i0))" -v hz="$hz" -v w="$(echo "$t1 - $t0" | bc)" \
	'BEGIN { printf "busy_cpu_s=%.2f idle_cpu_s=%.2f wall_s=%.2f\n", b / hz, i / hz, w }'
exit "$status"
