package idemmem_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemmem"
)

// A handler test without a database: the HTTP middleware over the
// in-memory store runs the handler once for a key and replays its stored
// response to the repeat.
func Example() {
	engine, err := idem.New(idemmem.New(), idem.Config{Secret: []byte("test-secret-of-at-least-32-bytes!")})
	if err != nil {
		log.Fatal(err)
	}
	defer engine.Shutdown(context.Background())
	mw, err := idem.NewMiddleware(engine, idem.MiddlewareConfig{})
	if err != nil {
		log.Fatal(err)
	}
	charges := 0
	charge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":%d}`, charges)
	})
	handler := mw.Required(nil)(charge)

	for range 2 { // the client's request, then its retry
		req := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Idempotency-Key", `"charge-000000000001"`)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Printf("%d %s replayed=%q\n", rec.Code, rec.Body, rec.Header().Get(idem.HeaderReplayed))
	}
	fmt.Println("charged", charges, "time")
	// Output:
	// 201 {"charge":1} replayed=""
	// 201 {"charge":1} replayed="true"
	// charged 1 time
}
