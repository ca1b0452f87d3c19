// Package demo is a small shop whose operations go through the public
// idempotency engine, with a flaky fake payment provider, so that `console
// demo` produces real completed, replayed, pending and unavailable records.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/unstuckhq/unstuck/idem"
)

// Order is a shop order.
type Order struct {
	ID        string    `json:"id"`
	SKU       string    `json:"sku"`
	Qty       int       `json:"qty"`
	CreatedAt time.Time `json:"created_at"`
}

// Payment is a successful payment of an order.
type Payment struct {
	ID          string `json:"id"`
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	ChargeID    string `json:"charge_id"`
	Status      string `json:"status"`
}

// Export is a finished export.
type Export struct {
	ID        string    `json:"id"`
	Format    string    `json:"format"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
}

// Shop is the demo shop. Its own state lives in memory; its idempotency
// records live in the engine's store.
type Shop struct {
	engine   *idem.Engine
	mw       *idem.Middleware
	provider *Provider
	log      *slog.Logger

	mu       sync.Mutex
	orders   []Order
	payments map[string]Payment
	exports  int
}

// ExportTTL is the retention of POST /shop/exports keys.
const ExportTTL = time.Hour

// NewShop returns the shop over engine, with the given provider.
func NewShop(engine *idem.Engine, provider *Provider, log *slog.Logger) (*Shop, error) {
	mw, err := idem.NewMiddleware(engine, idem.MiddlewareConfig{})
	if err != nil {
		return nil, err
	}
	return &Shop{engine: engine, mw: mw, provider: provider, log: log, payments: map[string]Payment{}}, nil
}

// Provider returns the shop's payment provider.
func (s *Shop) Provider() *Provider { return s.provider }

// Routes mounts the shop's public contract on r:
//
//	POST /shop/orders           key required  {"sku": string, "qty": int} → 201 order
//	GET  /shop/orders                         → 200 all orders
//	POST /shop/payments?fail=…  key required  {"order_id": string, "amount_cents": int} → 201 payment
//	POST /shop/exports          key optional, TTL 1 h  {"format": "csv"|"json"} → 201 export
//	GET  /shop/provider/state                 → 200 what the provider holds
//
// Requests authenticate with "Authorization: Bearer demo-<name>" (scope
// user:demo:<name>); without it the scope is the client address.
func (s *Shop) Routes(r chi.Router) {
	r.Route("/shop", func(r chi.Router) {
		r.Use(demoAuth)
		r.With(keyFirst(true), validated(validateOrder), s.mw.Required(nil)).Post("/orders", s.handleCreateOrder)
		r.Get("/orders", s.handleListOrders)
		r.With(keyFirst(true), validated(validatePayment), s.mw.Required(nil)).Post("/payments", s.handleCreatePayment)
		r.With(keyFirst(false), validated(validateExport), s.mw.Optional(&idem.RouteOpts{TTL: ExportTTL})).Post("/exports", s.handleCreateExport)
		r.Get("/provider/state", s.handleProviderState)
	})
}

// demoAuth maps "Authorization: Bearer demo-<name>" to the principal
// user:demo:<name>. Anything else after "Bearer" is refused with 401.
func demoAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		if h == "" {
			next.ServeHTTP(w, r)
			return
		}
		name, ok := strings.CutPrefix(h, "Bearer demo-")
		if !ok || name == "" || len(name) > 64 || strings.ContainsAny(name, ": \t") {
			idem.WriteProblem(w, idem.Problem{Status: http.StatusUnauthorized, Code: "unauthorized",
				Detail: `The demo accepts "Authorization: Bearer demo-<name>" only.`})
			return
		}
		next.ServeHTTP(w, r.WithContext(idem.ContextWithPrincipal(r.Context(), "demo", name)))
	})
}

type orderRequest struct {
	SKU *string `json:"sku"`
	Qty *int    `json:"qty"`
}

func validateOrder(b []byte) (any, *idem.Problem) {
	var in orderRequest
	if p := decodeStrict(b, &in); p != nil {
		return nil, p
	}
	switch {
	case in.SKU == nil:
		return nil, fieldProblem("sku", "is required")
	case *in.SKU == "" || len(*in.SKU) > 64:
		return nil, fieldProblem("sku", "must be 1 to 64 characters")
	case in.Qty == nil:
		return nil, fieldProblem("qty", "is required")
	case *in.Qty < 1 || *in.Qty > 1000:
		return nil, fieldProblem("qty", "must be between 1 and 1000")
	}
	return in, nil
}

type paymentRequest struct {
	OrderID     *string `json:"order_id"`
	AmountCents *int64  `json:"amount_cents"`
}

func validatePayment(b []byte) (any, *idem.Problem) {
	var in paymentRequest
	if p := decodeStrict(b, &in); p != nil {
		return nil, p
	}
	switch {
	case in.OrderID == nil || *in.OrderID == "":
		return nil, fieldProblem("order_id", "is required")
	case in.AmountCents == nil:
		return nil, fieldProblem("amount_cents", "is required")
	case *in.AmountCents < 1 || *in.AmountCents > 100_000_00:
		return nil, fieldProblem("amount_cents", "must be between 1 and 10000000")
	}
	return in, nil
}

type exportRequest struct {
	Format string `json:"format"`
}

func validateExport(b []byte) (any, *idem.Problem) {
	in := exportRequest{Format: "csv"}
	if len(bytes.TrimSpace(b)) > 0 {
		if p := decodeStrict(b, &in); p != nil {
			return nil, p
		}
	}
	if in.Format != "csv" && in.Format != "json" {
		return nil, fieldProblem("format", `must be "csv" or "json"`)
	}
	return in, nil
}

func fieldProblem(field, msg string) *idem.Problem {
	return &idem.Problem{Status: http.StatusBadRequest, Code: "invalid_request", Field: field,
		Detail: fmt.Sprintf("Field %q %s.", field, msg)}
}

// decodeStrict decodes one JSON object, refusing unknown fields and
// trailing data, and names the offending field where it can.
func decodeStrict(b []byte, v any) *idem.Problem {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the JSON object")
	}
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return fieldProblem(typeErr.Field, "has the wrong type: want "+typeErr.Type.String())
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fieldProblem(strings.Trim(name, `"`), "is not a known field")
	}
	return &idem.Problem{Status: http.StatusBadRequest, Code: "invalid_json", Detail: "The body must be one JSON object: " + err.Error() + "."}
}

// keyFirst answers a missing (when required) or invalid Idempotency-Key
// with the idempotency middleware's own problem before the body is
// validated, so that a request with a bad key and a bad body is told about
// the key, as the middleware mounted after the validation would. It checks
// the key with the middleware's default rules ([idem.KeyRules] zero value),
// which the shop uses.
func keyFirst(required bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := idem.ParseKeyHeader(r.Header, idem.KeyRules{})
			var ve *idem.ValidationError
			switch {
			case errors.Is(err, idem.ErrKeyMissing) && required:
				idem.WriteProblem(w, idem.Problem{Status: http.StatusBadRequest, Code: idem.CodeKeyMissing,
					Detail: "This route requires an Idempotency-Key header."})
			case errors.As(err, &ve):
				idem.WriteProblem(w, idem.Problem{Status: http.StatusBadRequest, Code: idem.CodeInvalidKey,
					Detail: "The Idempotency-Key is invalid: " + ve.Reason + "."})
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
}

type inputKey struct{}

// validated checks the JSON body before the idempotency middleware, so
// that a malformed request is answered 400 and stores nothing (the client
// may fix it and retry with the same key).
func validated(validate func([]byte) (any, *idem.Problem)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
			if err != nil {
				idem.WriteProblem(w, idem.Problem{Status: http.StatusRequestEntityTooLarge, Code: "request_too_large", Detail: "The body exceeds 1 MiB."})
				return
			}
			in, p := validate(b)
			if p != nil {
				idem.WriteProblem(w, *p)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), inputKey{}, in)))
		})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Shop) handleCreateOrder(w http.ResponseWriter, r *http.Request) {
	in := r.Context().Value(inputKey{}).(orderRequest)
	s.mu.Lock()
	o := Order{ID: fmt.Sprintf("ord_%06d", len(s.orders)+1), SKU: *in.SKU, Qty: *in.Qty, CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	s.orders = append(s.orders, o)
	s.mu.Unlock()
	_ = idem.Annotate(r.Context(), idem.Annotation{ResourceIDs: []string{"order:" + o.ID}})
	w.Header().Set("Location", "/shop/orders/"+o.ID)
	writeJSON(w, http.StatusCreated, o)
}

func (s *Shop) handleListOrders(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	out := append([]Order{}, s.orders...)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Shop) order(id string) (Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.orders {
		if o.ID == id {
			return o, true
		}
	}
	return Order{}, false
}

func (s *Shop) handleCreatePayment(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	in := ctx.Value(inputKey{}).(paymentRequest)
	fail := r.URL.Query().Get("fail")
	if !failModes[fail] {
		idem.WriteProblem(w, idem.Problem{Status: http.StatusBadRequest, Code: "invalid_request", Field: "fail",
			Detail: "Query parameter \"fail\" must be one of timeout_before_effect, timeout_after_effect, error_500, permanent."})
		return
	}
	if _, ok := s.order(*in.OrderID); !ok {
		idem.WriteProblem(w, idem.Problem{Status: http.StatusNotFound, Code: "order_not_found", Field: "order_id", Detail: "No order " + *in.OrderID + "."})
		return
	}
	info, _ := idem.RunInfoFrom(ctx)
	providerKey := PaymentProviderKey(info.KeyDigest)
	_ = idem.Annotate(ctx, idem.Annotation{CorrelationID: *in.OrderID, ExternalRef: providerKey})

	charge, err := s.provider.Charge(providerKey, *in.OrderID, *in.AmountCents, fail)
	var perr *ProviderError
	switch {
	case errors.As(err, &perr) && perr.Timeout():
		_ = idem.MarkUncertain(ctx, "provider did not answer: "+perr.Message)
		writeJSON(w, http.StatusAccepted, map[string]string{"status": "pending", "provider_reference": providerKey,
			"detail": "The provider did not answer; the payment may or may not exist. It will be reconciled."})
	case errors.As(err, &perr) && perr.Status >= 500:
		idem.WriteProblem(w, idem.Problem{Status: http.StatusBadGateway, Code: "provider_error", Detail: "The payment provider failed; nothing was charged. Retry with the same key."})
	case errors.As(err, &perr):
		idem.WriteProblem(w, idem.Problem{Status: http.StatusPaymentRequired, Code: "payment_declined", Detail: "The provider declined the payment: " + perr.Message + "."})
	case err != nil:
		idem.WriteProblem(w, idem.Problem{Status: http.StatusBadGateway, Code: "provider_error", Detail: "The payment provider failed."})
	default:
		p := Payment{ID: "pay_" + charge.ID[3:], OrderID: charge.OrderID, AmountCents: charge.AmountCents, ChargeID: charge.ID, Status: "succeeded"}
		s.mu.Lock()
		s.payments[p.ID] = p
		s.mu.Unlock()
		_ = idem.Annotate(ctx, idem.Annotation{ExternalRef: charge.ID, ResourceIDs: []string{"payment:" + p.ID}})
		writeJSON(w, http.StatusCreated, p)
	}
}

func (s *Shop) handleCreateExport(w http.ResponseWriter, r *http.Request) {
	in := r.Context().Value(inputKey{}).(exportRequest)
	s.mu.Lock()
	s.exports++
	e := Export{ID: fmt.Sprintf("exp_%06d", s.exports), Format: in.Format, Status: "ready", CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, e)
}

func (s *Shop) handleProviderState(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.provider.State())
}
