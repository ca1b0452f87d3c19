#!/usr/bin/env bash
# bench-stores.sh — idem.Run on a store against the database's
# limit (BENCHMARKS.md, "Stores against the database's limit").
# Runs BenchmarkRunFirst and BenchmarkRunReplay of one driver package with
# UNSTUCK_BENCH_ROUNDS interleaved rounds (engine and limit back to back,
# the order alternating each round; see idem/internal/benchround), keeps the raw
# output, and prints per benchmark and goroutine count the ratio
# limit ÷ engine of ns/op and of cpu-ns/op: min / median / max over the
# rounds (1.00 = the engine is as fast as the limit); where the benchmark
# has a floor variant (the limit plus the contract's client work, see
# idem/internal/benchfloor), also floor ÷ engine and limit ÷ floor. Usage:
#   ROUNDS=6 BENCHTIME=1s scripts/bench-stores.sh idem/idempgx   [raw.txt]
#   ROUNDS=6 BENCHTIME=1s scripts/bench-stores.sh idem/idemsqlite [raw.txt]
set -euo pipefail
pkg=${1:?usage: bench-stores.sh idem/idempgx|idem/idemsqlite [raw-output-file]}
raw=${2:-$(mktemp)}
ROUNDS=${ROUNDS:-6}
BENCHTIME=${BENCHTIME:-1s}
BENCH=${BENCH:-'BenchmarkRun(First|Replay)$'}
root=$(cd "$(dirname "$0")/.." && pwd)
echo "# load before: $(uptime)"
(cd "$root" && UNSTUCK_BENCH_ROUNDS=$ROUNDS go test -run '^$' -bench "$BENCH" -benchmem \
	-benchtime "$BENCHTIME" -timeout 60m "./$pkg/") >"$raw"
echo "# load after:  $(uptime)"
echo "# raw output: $raw"
echo "# benchmark goroutines: ratio A/B of ns/op (min / median / max) | of cpu-ns/op (min / median / max) | allocs/op | rounds"
echo "#   limit/engine: the row's figure; floor/engine: what is left of the engine's own work (1.00 = none);"
echo "#   limit/floor: the best any engine that does the contract's client work can reach against the limit"
awk '
	/^Benchmark/ {
		name = $1; sub(/-[0-9]+$/, "", name)         # GOMAXPROCS suffix
		round = 0
		if (match(name, /#[0-9]+$/)) { round = substr(name, RSTART + 1) + 0; name = substr(name, 1, RSTART - 1) }
		n = split(name, p, "/")                       # Benchmark…/engine|limit|floor/goroutines=g
		bench = p[1]; variant = p[2]; g = p[3]
		for (f = 1; f <= NF; f++) {
			if ($f == "ns/op") ns = $(f-1)
			if ($f == "cpu-ns/op") cpu = $(f-1)
			if ($f == "allocs/op") al = $(f-1)
		}
		key = bench " " g
		keys[key] = 1
		NS[key, variant, round] = ns; CPU[key, variant, round] = cpu; AL[key, variant] = al
		if (round + 1 > R[key]) R[key] = round + 1
	}
	function sortv(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t } }
	function stat(a, n) { sortv(a, n); return sprintf("%.2f / %.2f / %.2f", a[1], (n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2), a[n]) }
	function ratio(key, a, b,   k, r) {
		k = 0; delete rn; delete rc
		for (r = 0; r < R[key]; r++) {
			if (NS[key, a, r] == "" || NS[key, b, r] == "") continue
			k++
			rn[k] = NS[key, a, r] / NS[key, b, r]
			rc[k] = CPU[key, a, r] / CPU[key, b, r]
		}
		if (k) printf "%s %s/%s: %s | %s | %s %s, %s %s | %d\n", key, a, b, stat(rn, k), stat(rc, k), a, AL[key, a], b, AL[key, b], k
	}
	END {
		for (key in keys) {
			ratio(key, "limit", "engine")
			ratio(key, "floor", "engine")
			ratio(key, "limit", "floor")
		}
	}' "$raw" | sort
