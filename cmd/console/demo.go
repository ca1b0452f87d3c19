package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/demo"
)

// demoSecret seals the demo's stored responses when UNSTUCK_SECRET is not
// set. It is public: never use the demo's database for real data.
const demoSecret = "unstuck-demo-secret-not-for-production!"

func runDemo(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "listen `address`")
	dbURL := fs.String("db", "sqlite:"+filepath.Join(os.TempDir(), "unstuck-demo.db"), "database `URL`: sqlite:PATH or postgres://…")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: console demo [--addr ADDR] [--db URL]\n\nRuns the demo shop on the embedded SQLite default.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "console demo: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	secret := getenv("UNSTUCK_SECRET")
	if secret == "" {
		secret = demoSecret
		log.Warn("UNSTUCK_SECRET is not set: sealing demo responses with the public demo secret")
	}
	db, err := openDatabase(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate %s: %w", db.Redacted, err)
	}
	engine, err := idem.New(db.Store, idem.WithSecret([]byte(secret)), idem.WithLogger(log))
	if err != nil {
		return err
	}
	shop, err := demo.NewShop(engine, demo.NewProvider(), log)
	if err != nil {
		return err
	}
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	r.Get("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ready\n") })
	shop.Routes(r)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, `unstuck demo — database %s
listening on %s

Try:
  curl -i -X POST %[2]s/shop/orders -H 'Idempotency-Key: "order-0000000000001"' -H 'Content-Type: application/json' -d '{"sku":"book","qty":1}'
  (run it twice: the second answer is replayed, with Idempotent-Replayed: true)
`, db.Redacted, base)

	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	sweeper := time.NewTicker(time.Minute)
	defer sweeper.Stop()
	for {
		select {
		case err := <-served:
			return fmt.Errorf("serve: %w", err)
		case <-sweeper.C:
			if n, err := engine.Sweep(ctx); err != nil {
				log.Error("sweep failed", "error", err.Error())
			} else if n > 0 {
				log.Info("swept expired idempotency records", "count", n)
			}
		case <-ctx.Done():
			log.Info("shutting down")
			shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(shutdownCtx); err != nil {
				return fmt.Errorf("shutdown: %w", err)
			}
			return nil
		}
	}
}
