#!/usr/bin/env bash
# bench-middleware.sh — HTTP middleware overhead (BENCHMARKS.md,
# "HTTP middleware overhead"). Measures, in interleaved rounds
# with the order rotated each round, one process per (implementation,
# variant):
#   now    idem's BenchmarkMiddleware/{bare,first,replay} at the working tree,
#          and its floor-first, floor-replay: the least work the contract asks
#          for (benchMWFloor in idem/middleware_bench_test.go);
#   base   the same at git revision $BASE (default: none; e.g. BASE=a18d59f);
#   fiber  Fiber v2's idempotency middleware on the same request and handler,
#          in a throwaway module made in a temporary directory (not this
#          module; needs the Go module proxy), when FIBER=1.
# It prints each round's raw figures, then per implementation the overhead
# over its own bare handler (cpu-ns/op from getrusage, allocs/op):
# min/median/max over the rounds. Usage:
#   ROUNDS=8 BENCHTIME=300ms BASE=a18d59f FIBER=1 scripts/bench-middleware.sh
set -euo pipefail
ROUNDS=${ROUNDS:-8}
BENCHTIME=${BENCHTIME:-300ms}
FIBER_VERSION=${FIBER_VERSION:-v2.52.15}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

impls=(now)
(cd "$root" && go test -c -o "$tmp/now.test" ./idem/)
if [[ -n "${BASE:-}" ]]; then
	mkdir "$tmp/base-src"
	(cd "$root" && git archive "$BASE" | tar -x -C "$tmp/base-src")
	(cd "$tmp/base-src" && go test -c -o "$tmp/base.test" ./idem/)
	impls+=(base)
fi
if [[ "${FIBER:-}" == 1 ]]; then
	mkdir "$tmp/fiber"
	sed -n '/^# FIBER-BENCH-BEGIN$/,/^FIBER-BENCH-END$/p' "$0" | sed '1d;$d' >"$tmp/fiber/fiber_test.go"
	(cd "$tmp/fiber" && go mod init example.com/fiberbench >/dev/null 2>&1 &&
		go get "github.com/gofiber/fiber/v2@$FIBER_VERSION" >/dev/null 2>&1 && go mod tidy >/dev/null 2>&1 &&
		go test -c -o "$tmp/fiber.test" .)
	impls+=(fiber)
fi

bench_of() { # implementation → benchmark name
	if [[ $1 == fiber ]]; then echo BenchmarkFiberIdempotency; else echo BenchmarkMiddleware; fi
}

runs=()
for impl in "${impls[@]}"; do
	for v in bare first replay; do runs+=("$impl/$v"); done
done
runs+=(now/floor-first now/floor-replay) # the contract's least work (benchMWFloor)
n=${#runs[@]}
: >"$tmp/raw"
for ((round = 0; round < ROUNDS; round++)); do
	for ((i = 0; i < n; i++)); do
		run=${runs[$(((i + round * 4) % n))]} # rotate the order each round
		impl=${run%/*} v=${run#*/}
		(cd "$tmp" && "./$impl.test" -test.run '^$' -test.bench "^$(bench_of "$impl")\$/^$v\$" \
			-test.benchmem -test.benchtime "$BENCHTIME") |
			awk -v r="$round" -v impl="$impl" -v v="$v" '/^Benchmark/ {
				for (f = 1; f <= NF; f++) { if ($f == "cpu-ns/op") cpu = $(f-1); if ($f == "allocs/op") al = $(f-1); if ($f == "ns/op") ns = $(f-1) }
				print r, impl, v, ns, cpu, al }' >>"$tmp/raw"
	done
done
echo "# round impl variant ns/op cpu-ns/op allocs/op"
cat "$tmp/raw"
echo
echo "# overhead over the same implementation's bare handler, min/median/max over $ROUNDS rounds"
awk '
	{ key = $1 " " $2; ns[key, $3] = $5; al[key, $3] = $6; impls[$2] = 1; rounds[$1] = 1 }
	function sortv(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t } }
	function stat(a, n) { sortv(a, n); return sprintf("%.2f / %.2f / %.2f", a[1], (n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2), a[n]) }
	END {
		split("first replay floor-first floor-replay", variants, " ")
		for (impl in impls) for (v = 1; v <= 4; v++) {
			variant = variants[v]
			k = 0; delete d; delete ra; delete da
			for (r in rounds) {
				key = r " " impl
				if (ns[key, variant] == "") continue
				k++; d[k] = (ns[key, variant] - ns[key, "bare"]) / 1000; ra[k] = ns[key, variant] / ns[key, "bare"]; da[k] = al[key, variant] - al[key, "bare"]
			}
			if (k) printf "%-6s %-12s cpu overhead us %s | cpu ratio to bare %s | allocs overhead %s\n", impl, variant, stat(d, k), stat(ra, k), stat(da, k)
		}
		# what is left of the middleware over the floor, round by round
		for (v = 1; v <= 2; v++) {
			variant = variants[v]
			k = 0; delete d
			for (r in rounds) {
				key = r " now"
				if (ns[key, "floor-" variant] == "") continue
				k++; d[k] = (ns[key, variant] - ns[key, "floor-" variant]) / 1000
			}
			if (k) printf "now    %-12s cpu over its floor us %s\n", variant, stat(d, k)
		}
	}' "$tmp/raw" | sort
exit 0

# The throwaway Fiber module's benchmark (FIBER=1), written out by the
# script: the request, handler and answer of idem's BenchmarkMiddleware.
: <<'FIBER-BENCH-END'
# FIBER-BENCH-BEGIN
// Throwaway module (not part of unstuck): Fiber v2's idempotency middleware
// measured the way idem's BenchmarkMiddleware measures ours: a POST with a
// 25-byte JSON body decoded by the handler, which answers 201 with 80 bytes
// of JSON; bare = the handler alone, first = a new key each request,
// replay = one key answered beforehand. Keys are 36-character UUID-shaped
// strings (Fiber's default validator wants exactly 36), set in place.
package p2fiber

import (
	"encoding/json"
	"sync/atomic"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/idempotency"
	"github.com/valyala/fasthttp"
)

var (
	body     = []byte(`{"sku":"sku-123","qty":2}`)
	response = []byte(`{"id":"ord_8c1f2a","sku":"sku-123","qty":2,"created_at":"2026-11-30T02:27:21Z"}` + "\n")
)

var runs atomic.Int64

func handler(c *fiber.Ctx) error {
	runs.Add(1)
	var order struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	}
	if err := json.Unmarshal(c.Body(), &order); err != nil || order.SKU == "" || order.Qty <= 0 {
		return c.Status(400).SendString("bad order")
	}
	c.Set("Content-Type", "application/json")
	return c.Status(201).Send(response)
}

func app(withMW bool) fasthttp.RequestHandler {
	a := fiber.New()
	if withMW {
		a.Use(idempotency.New(idempotency.Config{KeyHeader: "Idempotency-Key", KeepResponseHeaders: []string{"Content-Type"}}))
	}
	a.Post("/orders", handler)
	return a.Handler()
}

func appendKey(b []byte, n int) []byte {
	const hexdigits = "0123456789abcdef"
	b = append(b, "018f3c2e-7b1a-7000-8000-"...)
	for shift := 44; shift >= 0; shift -= 4 {
		b = append(b, hexdigits[(n>>shift)&0xf])
	}
	return b
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func serve(h fasthttp.RequestHandler, c *fasthttp.RequestCtx, key []byte, wantReplay bool) error {
	c.Response.Reset()
	c.Request.Header.SetBytesV("Idempotency-Key", key)
	c.Request.SetBody(body)
	h(c)
	if c.Response.StatusCode() != 201 {
		return fmt.Errorf("status %d", c.Response.StatusCode())
	}
	if string(c.Response.Header.ContentType()) != "application/json" || len(c.Response.Body()) != len(response) {
		return fmt.Errorf("answer %q %q", c.Response.Header.ContentType(), c.Response.Body())
	}
	return nil
}

func loop(b *testing.B, op func(i int) error) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := range b.N {
		if err := op(i); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
}

func newCtx() *fasthttp.RequestCtx {
	c := &fasthttp.RequestCtx{}
	c.Request.Header.SetMethod(fiber.MethodPost)
	c.Request.SetRequestURI("/orders")
	c.Request.Header.SetContentType("application/json")
	return c
}

func BenchmarkFiberIdempotency(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		h, c := app(false), newCtx()
		var key []byte
		loop(b, func(i int) error { key = appendKey(key[:0], i); return serve(h, c, key, false) })
	})
	b.Run("first", func(b *testing.B) {
		h, c := app(true), newCtx()
		var key []byte
		loop(b, func(i int) error { key = appendKey(key[:0], i+1); return serve(h, c, key, false) })
	})
	b.Run("replay", func(b *testing.B) {
		h, c := app(true), newCtx()
		key := appendKey(nil, 0)
		if err := serve(h, c, key, false); err != nil {
			b.Fatal(err)
		}
		before := runs.Load()
		loop(b, func(int) error { return serve(h, c, key, true) })
		if runs.Load() != before {
			b.Fatalf("the handler ran %d times on replays", runs.Load()-before) // Fiber marks no replay: the handler must not run
		}
	})
}
FIBER-BENCH-END
