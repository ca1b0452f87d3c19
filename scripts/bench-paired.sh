#!/usr/bin/env bash
# bench-paired.sh — the store rows measured inside one benchmark:
# BenchmarkRunPaired of one driver package (limit, required, floor and
# engine in blocks of operations shuffled block by block; see
# idem/internal/benchround.Paired), COUNT runs in a row. Each run reports, per
# ratio, the median over its blocks; this prints min / median / max of those
# medians over the runs, and the per-op time and CPU. Usage:
#   COUNT=5 N=20000 PART=replay scripts/bench-paired.sh idem/idempgx [raw.txt]
#   COUNT=5 N=6000  PART=first  scripts/bench-paired.sh idem/idempgx [raw.txt]
set -euo pipefail
pkg=${1:?usage: bench-paired.sh idem/idempgx|idem/idemsqlite [raw-output-file]}
raw=${2:-$(mktemp)}
COUNT=${COUNT:-5}
N=${N:-20000}
PART=${PART:-replay}
root=$(cd "$(dirname "$0")/.." && pwd)
echo "# load before: $(uptime)"
(cd "$root" && go test -run '^$' -bench "BenchmarkRunPaired/$PART/" -benchtime "${N}x" -count "$COUNT" \
	-timeout 60m "./$pkg/") >"$raw"
echo "# load after:  $(uptime)"
echo "# raw output: $raw"
echo "# benchmark: metric min / median / max over $COUNT runs (a ratio is each run's median over its blocks)"
awk '
	/^BenchmarkRunPaired/ {
		name = $1; sub(/-[0-9]+$/, "", name)
		for (f = 3; f < NF; f += 2) {
			unit = $(f+1)
			if (unit == "ns/op" || unit == "B/op" || unit == "allocs/op") continue
			key = name " " unit
			if (!(key in n)) order[++keys] = key
			vals[key, ++n[key]] = $f
		}
	}
	END {
		for (k = 1; k <= keys; k++) {
			key = order[k]; m = n[key]
			for (i = 1; i <= m; i++) v[i] = vals[key, i] + 0
			for (i = 2; i <= m; i++) { x = v[i]; j = i - 1; while (j > 0 && v[j] > x) { v[j+1] = v[j]; j-- } v[j+1] = x }
			med = (m % 2) ? v[(m+1)/2] : (v[m/2] + v[m/2+1]) / 2
			fmt = (v[m] < 10) ? "%s: %.3f / %.3f / %.3f\n" : "%s: %.0f / %.0f / %.0f\n"
			printf fmt, key, v[1], med, v[m]
		}
	}' "$raw" | sort
