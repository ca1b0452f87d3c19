package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
)

const (
	httpRoute    = "effects"
	effectsTable = "CREATE TABLE effects (key text NOT NULL, body text NOT NULL)"
)

// httpExperiment: for every key two senders POST the same request
// concurrently to a real HTTP server whose route has the idempotency
// middleware on a pgxv5 store through the proxy, each repeating on an
// error, a 409 or a 202 for a processing record, as a client would, until
// it gets a final answer. The handler's effect is counted in memory
// (plain) or is its row in the effects table, written through the
// middleware's transaction (transactional). Each 2xx body is unique to the
// handler run that wrote it, so two senders with different bodies saw two
// runs.
func httpExperiment(ctx context.Context, env *pgEnv, sc scale, plan faultPlan, fault faultFunc, log *slog.Logger, policy string, transactional bool) (row, error) {
	r := row{Name: "http-" + plan.name + policySuffix(policy), Path: "HTTP middleware", Store: "PostgreSQL",
		Mode: modeName("plain", policy), Fault: plan.desc(sc), Keys: sc.httpKeys}
	schema := ""
	if transactional {
		r.Name, r.Mode, schema = "httptx-"+plan.name+policySuffix(policy), modeName("transactional", policy), effectsTable
	}
	db, eng, err := env.newEngineDB(ctx, int32(sc.workers*4), schema, log, policy)
	if err != nil {
		return r, err
	}
	defer db.close()
	m, err := idem.NewMiddleware(eng, idem.MiddlewareConfig{
		Transactional:           transactional,
		AcceptedWhileInProgress: true,
		ScopeResolvers:          []idem.ScopeResolver{func(*http.Request) (string, bool) { return scopeName, true }},
	})
	if err != nil {
		return r, err
	}
	eff := newEffects()
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		key := req.Header.Get("X-Key")
		body := newBody()
		if transactional {
			tx, _ := idempgx.TxFrom(req.Context())
			if _, err := tx.Exec(req.Context(), "INSERT INTO effects (key, body) VALUES ($1, $2)", key, body); err != nil {
				http.Error(w, "store", http.StatusInternalServerError)
				return
			}
		} else {
			eff.add(key)
		}
		time.Sleep(sc.work)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /effects", m.Required(&idem.RouteOpts{Name: httpRoute, Lease: sc.lease})(handler))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := &http.Client{Timeout: 15 * time.Second}

	keys := makeKeys(r.Name, sc.httpKeys)
	deadline := time.Now().Add(sc.window + sc.settle)
	var mu sync.Mutex
	twoBodies := 0
	do := func(ctx context.Context, key string) bool {
		var bodies [2]string
		var wg sync.WaitGroup
		for i := range bodies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				bodies[i] = send(ctx, client, srv.URL+"/effects", key, deadline)
			}()
		}
		wg.Wait()
		if bodies[0] != "" && bodies[1] != "" && bodies[0] != bodies[1] {
			mu.Lock()
			twoBodies++
			mu.Unlock()
		}
		return true
	}
	r.Faults, err = drive(ctx, sc, keys, func(ctx context.Context) (int, error) { return fault(ctx, db.proxy) }, do)
	if err != nil {
		return r, err
	}
	srv.Close()
	if err := shutdown(ctx, eng); err != nil {
		r.Note = "shutdown: " + err.Error()
	}
	r.TwoBodies = twoBodies
	if transactional {
		if err := committedEffects(ctx, db, eff); err != nil {
			return r, err
		}
	}
	r.RanTwice, r.Lost = eff.tally(keys)
	return r, countRecords(ctx, db, &r, eng)
}

// committedEffects adds the committed effect rows of the database to eff.
func committedEffects(ctx context.Context, db *database, eff *effects) error {
	rows, err := db.direct.Query(ctx, "SELECT key FROM effects")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return err
		}
		eff.add(k)
	}
	return rows.Err()
}

// send posts key's request until it gets a final answer or the deadline
// passes, and returns the 2xx body it got ("" for none).
func send(ctx context.Context, client *http.Client, url, key string, deadline time.Time) string {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"key":"`+key+`"}`))
		if err != nil {
			return ""
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", strconv.Quote(key))
		req.Header.Set("X-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusAccepted:
			var st struct {
				Status string `json:"status"`
			}
			if json.Unmarshal(body, &st) == nil && st.Status == string(idemdriver.StatusPending) {
				return "" // an operator's case now
			}
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			return string(body)
		case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusConflict:
			return ""
		case resp.StatusCode == http.StatusConflict && strings.Contains(string(body), idem.CodeResponseUnavailable):
			return ""
		}
		sleep(ctx, 150*time.Millisecond)
	}
	return ""
}

// newBody returns a response body unique to one handler run.
func newBody() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return `{"id":"` + hex.EncodeToString(b[:]) + `"}`
}
