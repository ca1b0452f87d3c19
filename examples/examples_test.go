package examples_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// examples are the programs under examples/, each with lines its output
// must hold when it works.
var examples = []struct {
	dir  string
	args []string
	want []string
}{
	{"middleware", nil, []string{
		`POST /orders -> 201 {"order":"ord_000001"} Idempotent-Replayed=""`,
		`POST /orders -> 201 {"order":"ord_000001"} Idempotent-Replayed="true"`,
		"orders created: 1",
	}},
	{"run", nil, []string{
		"charge ch_001 amount 1999 replayed=false",
		"charge ch_001 amount 1999 replayed=true",
		"with another amount: refused",
		"charges made: 1",
	}},
	{"transport", nil, []string{
		`call 1: 201 {"order":"ord_000001"} key="order-7f3c9a12-0001" Idempotent-Replayed=""`,
		`call 2: 201 {"order":"ord_000001"} key="order-7f3c9a12-0001" Idempotent-Replayed="true"`,
		"server received 3 attempts",
	}},
	{"riverjob", nil, []string{
		"worker ran 1 time(s) for 2 deliveries",
		"verify: verdict=happened external_ref=bk_001",
	}},
	{"saga", nil, []string{
		"operation order-1: completed",
		"operation order-2: compensated",
		"reserve_stock compensatable compensated",
		"stock still reserved: 1; charges: 1",
	}},
}

// TestExamples builds every program under examples/ (one go build, which
// shares the build cache with the rest of the tests) and runs each one,
// which must exit 0 within a minute and print its key lines.
func TestExamples(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the examples: %v", err)
	}
	bin := t.TempDir()
	pkgs := make([]string, len(examples))
	for i, ex := range examples {
		pkgs[i] = "./" + ex.dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goBin, append([]string{"build", "-o", bin + string(filepath.Separator)}, pkgs...)...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	for _, ex := range examples {
		t.Run(ex.dir, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, ex.dir), ex.args...)
			cmd.Dir = t.TempDir()
			cmd.Env = append(cmd.Environ(), "TMPDIR="+t.TempDir())
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			t.Logf("%s ran in %s:\n%s", ex.dir, time.Since(start).Round(time.Millisecond), stdout.String())
			if err != nil {
				t.Fatalf("%s: %v (context: %v)\nstderr:\n%s", ex.dir, err, ctx.Err(), stderr.String())
			}
			for _, line := range ex.want {
				if !strings.Contains(stdout.String(), line) {
					t.Errorf("%s: output lacks %q", ex.dir, line)
				}
			}
		})
	}
}
