// Command middleware is a net/http server whose POST /orders runs once per
// Idempotency-Key: the idem HTTP middleware on a SQLite store (idemsqlite).
//
// By default it listens on a free loopback port, sends itself the same
// request twice, prints both answers (the second is a replay, with
// Idempotent-Replayed: true) and exits. With -serve it keeps serving
// until interrupted:
//
//	go run ./examples/middleware -serve -addr 127.0.0.1:8081
//	curl -i -X POST localhost:8081/orders -H 'Idempotency-Key: "order-0000000000001"' -d '{"sku":"book"}'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	dbPath := flag.String("db", "", "SQLite file (default: a new file in a temporary directory)")
	serve := flag.Bool("serve", false, "keep serving until interrupted instead of sending two requests to itself")
	flag.Parse()
	if err := run(*addr, *dbPath, *serve); err != nil {
		log.Fatal(err)
	}
}

func run(addr, dbPath string, serve bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if dbPath == "" {
		dir, err := os.MkdirTemp("", "unstuck-example-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		dbPath = filepath.Join(dir, "app.db")
	}

	// The store, migrated on every start (a no-op once done), and the engine.
	db, err := idemsqlite.Open(dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	store := idemsqlite.New(db)
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	engine, err := idem.New(store, idem.Config{Secret: secret()})
	if err != nil {
		return err
	}
	// Shutdown waits for outcomes still being recorded: call it before exit.
	defer func() {
		if err := engine.Shutdown(context.Background()); err != nil {
			log.Print(err)
		}
	}()

	// The middleware; an error here is a configuration error.
	mw, err := idem.NewMiddleware(engine, idem.MiddlewareConfig{})
	if err != nil {
		return err
	}
	var orders atomic.Int64
	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := orders.Add(1) // the side effect: runs once per key
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":"ord_%06d"}`, n)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /orders", mw.Required(nil)(createOrder))

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Printf("listening on http://%s (database %s)\n", ln.Addr(), dbPath)

	if serve {
		select {
		case <-ctx.Done():
		case err := <-served:
			return err
		}
	} else if err := selfTest("http://" + ln.Addr().String()); err != nil {
		return err
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Println("orders created:", orders.Load())
	return nil
}

// selfTest sends the same POST twice with one key, as a client retrying
// after a lost answer would.
func selfTest(base string) error {
	for range 2 {
		req, err := http.NewRequest(http.MethodPost, base+"/orders", strings.NewReader(`{"sku":"book"}`))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", `"order-0000000000001"`) // an RFC 9651 String, 16–255 bytes
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		fmt.Printf("POST /orders -> %d %s Idempotent-Replayed=%q\n",
			resp.StatusCode, body, resp.Header.Get("Idempotent-Replayed"))
	}
	return nil
}

// secret is the application secret that seals stored responses: at least 32
// bytes, from your secret store. The example falls back to a fixed one.
func secret() []byte {
	if s := os.Getenv("UNSTUCK_SECRET"); s != "" {
		return []byte(s)
	}
	return []byte("example-secret-not-for-production!!")
}
