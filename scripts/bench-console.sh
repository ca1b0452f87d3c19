#!/usr/bin/env bash
# bench-console.sh — the console's pages against their limits on a fresh
# database (BENCHMARKS.md, "Console pages against their SQL"). One command: creates a database of its own on the PostgreSQL
# server of PGURL, seeds KEYS keys and OPERATIONS operations (bench seed:
# COPY, indexes rebuilt, VACUUM ANALYZE), runs bench pages (ROUNDS rounds of
# N runs per variant, order alternating; prints min/median/max of page ÷
# limit per page), then drops the database, also when interrupted. Usage:
#   scripts/bench-console.sh                                   # 10 M keys, 1 M operations
#   KEYS=1000000 OPERATIONS=100000 ROUNDS=6 N=50 scripts/bench-console.sh
#   KEEP=1 scripts/bench-console.sh      # keep the database (its URL is printed)
# Seeding 10 M keys takes 7–30 minutes on 2 shared cores, 25 GB of disk are
# plenty. Extra arguments go to bench pages (e.g. --only keys).
set -euo pipefail
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
KEYS=${KEYS:-10000000}
OPERATIONS=${OPERATIONS:-1000000}
ROUNDS=${ROUNDS:-10}
N=${N:-50}
root=$(cd "$(dirname "$0")/.." && pwd)
db="unstuck_bench_$(date +%s)_$$"
admin="$PGURL/postgres?sslmode=disable"
url="$PGURL/$db?sslmode=disable"
bin=$(mktemp -d)
cleanup() {
	rm -rf "$bin"
	if [[ -z "${KEEP:-}" ]]; then
		psql "$admin" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null || true
	else
		echo "# kept: $url"
	fi
}
trap cleanup EXIT
(cd "$root" && go build -o "$bin/bench" ./cmd/bench)
psql "$admin" -qc "CREATE DATABASE $db" >/dev/null
echo "# database $db; load before: $(uptime)"
start=$(date +%s)
"$bin/bench" seed --db "$url" --keys "$KEYS" --operations "$OPERATIONS" | tail -2
echo "# seeded in $(($(date +%s) - start)) s; load: $(uptime)"
"$bin/bench" pages --db "$url" --rounds "$ROUNDS" --n "$N" "$@"
echo "# load after: $(uptime)"
