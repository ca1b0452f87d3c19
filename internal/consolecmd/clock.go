package consolecmd

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// clockSkew measures the application's clock minus the database's
// (saga.Runner.ClockSkew).
type clockSkew func(context.Context) (time.Duration, error)

// maxReadySkew is the skew between the console's clock and its database's
// above which /readyz fails: River schedules the retries, snoozes and
// rescues of saga jobs on the process clock, so they would be off by as
// much.
const maxReadySkew = 30 * time.Second

// checkClock measures the runner's clock skew once at start-up (the
// runner logs a warning above its threshold, 2 s) and returns the
// measurement for /readyz. A failure is logged, not fatal: /readyz
// reports the database.
func checkClock(ctx context.Context, runner interface {
	ClockSkew(context.Context) (time.Duration, error)
}, log *slog.Logger) clockSkew {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := runner.ClockSkew(ctx); err != nil {
		log.Warn("cannot measure the clock skew with the database", "error", err.Error())
	}
	return runner.ClockSkew
}

// readyClock answers GET /readyz with 503 while the clock skew exceeds
// maxReadySkew either way, and passes every other request (and /readyz
// otherwise, which checks the database) to next.
func readyClock(next http.Handler, skew clockSkew, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			d, err := skew(ctx)
			cancel()
			if err == nil && (d > maxReadySkew || -d > maxReadySkew) {
				log.Warn("not ready: clock skew with the database", "skew", d.Round(time.Millisecond).String(), "max", maxReadySkew.String())
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = fmt.Fprintf(w, "clock skew with the database %s exceeds %s\n", d.Round(time.Millisecond), maxReadySkew)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
