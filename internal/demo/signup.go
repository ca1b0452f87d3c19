package demo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// SignupType is the saga operation type of a demo signup.
const SignupType = "demo_signup"

// Failure modes of a signup, chosen per request with "fail".
const (
	// SignupWorkspacePermanent: the provider makes the workspace, then
	// refuses to activate it (a 422): the workspace and the account are
	// compensated; the operation ends compensated.
	SignupWorkspacePermanent = "workspace_permanent"
	// SignupWorkspaceTimeoutAfterEffect: the provider makes the workspace,
	// then the answer is lost: the step is uncertain, verified by its key,
	// and completed without a second workspace.
	SignupWorkspaceTimeoutAfterEffect = "workspace_timeout_after_effect"
	// SignupWorkspaceCompensationFails: as workspace_permanent, but the
	// provider also fails every deletion of the compensation's attempts:
	// the operation is review_required, the account left active (the
	// compensation halts). A retry by an operator then succeeds.
	SignupWorkspaceCompensationFails = "workspace_compensation_fails"
	// SignupWelcomePermanent: the mailer refuses the welcome email for
	// good (once): the operation is review_required, with nothing
	// compensated (the step is after the pivot).
	SignupWelcomePermanent = "welcome_permanent"
)

var signupFailModes = []string{SignupWorkspacePermanent, SignupWorkspaceTimeoutAfterEffect, SignupWorkspaceCompensationFails, SignupWelcomePermanent}

// SignupDB is the database of the signups' local accounts: the demo's own
// table demo_account. Queries are written with $1, $2… placeholders; an
// implementation on SQLite rewrites them.
type SignupDB interface {
	// Exec runs a statement.
	Exec(ctx context.Context, query string, args ...any) error
	// QueryRow scans the first row of query into dest; ok is false when
	// there is none.
	QueryRow(ctx context.Context, query string, args []any, dest ...any) (ok bool, err error)
}

// SignupInput is the input of a signup operation.
type SignupInput struct {
	Email string `json:"email"`
	Fail  string `json:"fail,omitempty"`
}

// Account is a local account made by a signup.
type Account struct {
	ID          string `json:"id"`
	Email       string `json:"email"`
	Status      string `json:"status"` // active, or closed by compensation
	OperationID string `json:"operation_id"`
	CreatedAt   string `json:"created_at"`
	ClosedAt    string `json:"closed_at,omitempty"`
}

// Mailer is the fake mailer of welcome emails. Like a real provider it
// deduplicates by the idempotency key it is given.
type Mailer struct {
	mu      sync.Mutex
	sent    map[string]string // key → message id
	refused map[string]bool   // keys refused once
	n       int
}

// NewMailer returns an empty mailer.
func NewMailer() *Mailer { return &Mailer{sent: map[string]string{}, refused: map[string]bool{}} }

// Send sends the welcome email to under key, or returns the message sent
// under key before. With refuseOnce, the first call for key is refused
// permanently (the mailbox does not exist), later ones succeed (an
// operator fixed it).
func (m *Mailer) Send(ctx context.Context, key, to string, refuseOnce bool) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.sent[key]; ok {
		return id, nil
	}
	if refuseOnce && !m.refused[key] {
		m.refused[key] = true
		return "", saga.Permanent(fmt.Errorf("mailer: mailbox %s does not exist", to))
	}
	m.n++
	id := fmt.Sprintf("msg_%06d", m.n)
	m.sent[key] = id
	return id, nil
}

// Sent returns how many welcome emails were sent.
func (m *Mailer) Sent() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sent)
}

// Signups is the demo's signup flow: a saga of three steps.
//
//  1. account (compensatable, local): the account row in demo_account;
//     compensated by closing it.
//  2. workspace (pivot, the workspace provider): the workspace, made under
//     the step's key; verified by that key when the outcome is unknown;
//     compensated by deleting it, also after its own failure (activation
//     refused leaves a workspace behind).
//  3. welcome (retriable, the mailer): the welcome email. After the pivot:
//     a permanent failure goes to review, never to compensation.
type Signups struct {
	shop       *Shop
	db         SignupDB
	workspaces WorkspaceAPI
	mailer     *Mailer
	log        *slog.Logger

	start func(ctx context.Context, id string, in SignupInput, correlation string) error
	get   func(ctx context.Context, id string) (sagadriver.Operation, error)
}

// NewSignups returns the signups of shop over db and the workspace
// provider. Register [Signups.Definition] with the saga runner, then
// hand the runner over with [UseRunner].
func NewSignups(shop *Shop, db SignupDB, workspaces WorkspaceAPI, log *slog.Logger) *Signups {
	if log == nil {
		log = slog.Default()
	}
	return &Signups{shop: shop, db: db, workspaces: workspaces, mailer: NewMailer(), log: log}
}

// UseRunner makes s start and read its operations with runner, whose
// definitions include s.Definition().
func UseRunner[TTx any](s *Signups, runner *saga.Runner[TTx]) {
	s.start = func(ctx context.Context, id string, in SignupInput, correlation string) error {
		// The operation, its steps and its first job commit together in a
		// transaction of ours (the outbox); no job runs before the commit.
		err := runner.WithinTx(ctx, func(ctx context.Context, tx TTx) error {
			_, err := runner.StartTx(ctx, tx, SignupType, in, &saga.StartOpts{ID: id, CorrelationID: correlation})
			return err
		})
		if errors.Is(err, saga.ErrExists) {
			// A retried request whose first run started the operation
			// but stored no response: the same operation.
			return nil
		}
		return err
	}
	s.get = runner.Get
}

// Migrate creates the demo's account table if missing.
func (s *Signups) Migrate(ctx context.Context) error {
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS demo_account (
			id           TEXT PRIMARY KEY,
			key          TEXT NOT NULL UNIQUE,
			operation_id TEXT NOT NULL,
			email        TEXT NOT NULL,
			status       TEXT NOT NULL CHECK (status IN ('active', 'closed')),
			created_at   TEXT NOT NULL,
			closed_at    TEXT NOT NULL DEFAULT ''
		)`,
		// One active account per email: a second signup for it fails.
		`CREATE UNIQUE INDEX IF NOT EXISTS demo_account_active_email ON demo_account (email) WHERE status = 'active'`,
	} {
		if err := s.db.Exec(ctx, q); err != nil {
			return fmt.Errorf("demo: migrate signups: %w", err)
		}
	}
	return nil
}

// Workspaces returns the workspace provider of the signups.
func (s *Signups) Workspaces() WorkspaceAPI { return s.workspaces }

// Definition is the saga of a signup.
func (s *Signups) Definition() saga.Definition {
	return saga.Definition{Type: SignupType, Steps: []saga.Step{
		{
			Name: "account", System: "local", Kind: sagadriver.Compensatable,
			Retry:             saga.RetryPolicy{MaxAttempts: 4, Initial: 250 * time.Millisecond, Max: 2 * time.Second},
			CompensationRetry: saga.RetryPolicy{MaxAttempts: 4, Initial: 250 * time.Millisecond, Max: 2 * time.Second},
			Timeout:           10 * time.Second,
			Do:                s.createAccount,
			Compensate:        s.closeAccount,
		},
		{
			Name: "workspace", System: "workspace-provider", Kind: sagadriver.Pivot, CompensateOnFailure: true,
			Retry:             saga.RetryPolicy{MaxAttempts: 4, Initial: 500 * time.Millisecond, Max: 5 * time.Second},
			CompensationRetry: saga.RetryPolicy{MaxAttempts: workspaceCompAttempts, Initial: 250 * time.Millisecond, Max: 2 * time.Second},
			Timeout:           10 * time.Second,
			VerifyAfter:       time.Second,
			MaxVerifications:  5,
			Do:                s.createWorkspace,
			Verify:            s.verifyWorkspace,
			Compensate:        s.deleteWorkspace,
		},
		{
			Name: "welcome", System: "mailer", Kind: sagadriver.Retriable,
			Retry:   saga.RetryPolicy{MaxAttempts: 5, Initial: 500 * time.Millisecond, Max: 5 * time.Second},
			Timeout: 10 * time.Second,
			Do:      s.sendWelcome,
		},
	}}
}

// workspaceCompAttempts bounds the deletions of a compensation; the
// workspace_compensation_fails mode fails them all.
const workspaceCompAttempts = 3

func decodeSignup(in saga.StepInput) (SignupInput, error) {
	var v SignupInput
	if err := in.Decode(&v); err != nil {
		return v, saga.Permanent(err)
	}
	return v, nil
}

// AccountID is the ID of the account made under the step key key: the
// same on every attempt.
func AccountID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "acct_" + hex.EncodeToString(sum[:8])
}

func (s *Signups) createAccount(ctx context.Context, in saga.StepInput) (saga.Result, error) {
	v, err := decodeSignup(in)
	if err != nil {
		return saga.Result{}, err
	}
	id := AccountID(in.Key)
	err = s.db.Exec(ctx, `INSERT INTO demo_account (id, key, operation_id, email, status, created_at) VALUES ($1, $2, $3, $4, 'active', $5) ON CONFLICT (key) DO NOTHING`,
		id, in.Key, in.OperationID, v.Email, time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		var other string
		if ok, qerr := s.db.QueryRow(ctx, `SELECT id FROM demo_account WHERE email = $1 AND status = 'active' AND key <> $2`, []any{v.Email, in.Key}, &other); qerr == nil && ok {
			return saga.Result{}, saga.Permanent(fmt.Errorf("email %s already has the active account %s", v.Email, other))
		}
		return saga.Result{}, err
	}
	return saga.Result{ExternalID: id}, nil
}

func (s *Signups) closeAccount(ctx context.Context, in saga.StepInput) error {
	// Idempotent, and a no-op when the account was never made.
	return s.db.Exec(ctx, `UPDATE demo_account SET status = 'closed', closed_at = $1 WHERE key = $2 AND status = 'active'`,
		time.Now().UTC().Format(time.RFC3339Nano), in.StepKey)
}

// classifyWorkspace: a lost answer is uncertain, a 4xx permanent, the rest
// (5xx) transient.
func classifyWorkspace(err error) error {
	var werr *WorkspaceError
	switch {
	case errors.As(err, &werr) && werr.Timeout():
		return saga.Uncertain(err)
	case errors.As(err, &werr) && werr.Status < 500:
		return saga.Permanent(err)
	}
	return err
}

func (s *Signups) createWorkspace(ctx context.Context, in saga.StepInput) (saga.Result, error) {
	v, err := decodeSignup(in)
	if err != nil {
		return saga.Result{}, err
	}
	if in.Attempt == 1 {
		// The fault of the requested mode, at the provider, once.
		var faults []WorkspaceFault
		switch v.Fail {
		case SignupWorkspacePermanent:
			faults = []WorkspaceFault{WSActivateRefused}
		case SignupWorkspaceTimeoutAfterEffect:
			faults = []WorkspaceFault{WSTimeoutAfter}
		case SignupWorkspaceCompensationFails:
			faults = []WorkspaceFault{WSActivateRefused}
			for range workspaceCompAttempts {
				faults = append(faults, WSDeleteError)
			}
		}
		if len(faults) > 0 {
			if err := s.workspaces.InjectFaults(ctx, in.Key, faults...); err != nil {
				return saga.Result{}, saga.Transient(err)
			}
		}
	}
	ws, err := s.workspaces.Create(ctx, in.Key, v.Email)
	if err != nil {
		err = classifyWorkspace(err)
		if saga.Classify(err) == sagadriver.ClassPermanent {
			// Refused, maybe after making the workspace: name what is
			// left for the compensation and the operators.
			if left, ok, lerr := s.workspaces.Lookup(ctx, in.Key); lerr == nil && ok {
				return saga.Result{ExternalID: left.ID}, err
			}
		}
		return saga.Result{}, err
	}
	return saga.Result{ExternalID: ws.ID}, nil
}

func (s *Signups) verifyWorkspace(ctx context.Context, in saga.StepInput) (saga.Verification, error) {
	ws, ok, err := s.workspaces.Lookup(ctx, in.StepKey)
	switch {
	case err != nil:
		return saga.Verification{}, err
	case !ok:
		return saga.Verification{Outcome: saga.NotApplied, Detail: "no workspace under " + in.StepKey}, nil
	case !ws.Active:
		// Made but not activated: the step cannot complete; executing it
		// again with the same key answers as the first time did.
		return saga.Verification{Outcome: saga.NotApplied, Detail: "workspace " + ws.ID + " exists but is not active"}, nil
	}
	return saga.Verification{Outcome: saga.Applied, Result: saga.Result{ExternalID: ws.ID}, Detail: "workspace " + ws.ID}, nil
}

func (s *Signups) deleteWorkspace(ctx context.Context, in saga.StepInput) error {
	return classifyWorkspace(s.workspaces.Delete(ctx, in.StepKey))
}

func (s *Signups) sendWelcome(ctx context.Context, in saga.StepInput) (saga.Result, error) {
	v, err := decodeSignup(in)
	if err != nil {
		return saga.Result{}, err
	}
	id, err := s.mailer.Send(ctx, in.Key, v.Email, v.Fail == SignupWelcomePermanent)
	if err != nil {
		return saga.Result{}, err
	}
	return saga.Result{ExternalID: id}, nil
}

// Routes mounts the signups on r, the router the shop is mounted on,
// behind the shop's authentication and idempotency middleware:
//
//	POST /shop/signups            key required  {"email": string, "fail": optional} → 202 {"operation_id"}
//	GET  /shop/signups/{id}                     → 200 the operation and its steps
//	GET  /shop/provider/state                   → 200 the payment provider's state and the workspaces
//
// The last one replaces the shop's own, which knows no workspaces.
func (s *Signups) Routes(r chi.Router) {
	r.With(demoAuth, keyFirst(true), validated(validateSignup), s.shop.mw.Required(nil)).Post("/shop/signups", s.handleCreate)
	r.With(demoAuth).Get("/shop/signups/{operation_id}", s.handleGet)
	r.With(demoAuth).Get("/shop/provider/state", s.handleProviderState)
}

type signupRequest struct {
	Email *string `json:"email"`
	Fail  *string `json:"fail"`
}

func validateSignup(b []byte) (any, *idem.Problem) {
	var in signupRequest
	if p := decodeStrict(b, &in); p != nil {
		return nil, p
	}
	if in.Email == nil {
		return nil, fieldProblem("email", "is required")
	}
	email := strings.ToLower(strings.TrimSpace(*in.Email))
	local, domain, ok := strings.Cut(email, "@")
	if !ok || local == "" || !strings.Contains(domain, ".") || strings.ContainsAny(domain, "@") ||
		strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") || len(email) > 254 || strings.ContainsAny(email, " \t\r\n<>\",;") {
		return nil, fieldProblem("email", "must be an email address such as ann@example.com")
	}
	out := SignupInput{Email: email}
	if in.Fail != nil {
		found := false
		for _, m := range signupFailModes {
			found = found || *in.Fail == m
		}
		if !found {
			return nil, fieldProblem("fail", "must be one of "+strings.Join(signupFailModes, ", "))
		}
		out.Fail = *in.Fail
	}
	return out, nil
}

// SignupOperationID is the operation ID of the signup requested under the
// idempotency record whose key digest is digest: a retried request, run
// again by the idempotency engine, finds the same operation.
func SignupOperationID(digest string) string { return "signup_" + digest[:min(32, len(digest))] }

func (s *Signups) handleCreate(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	in := ctx.Value(inputKey{}).(SignupInput)
	info, ok := idem.RunInfoFrom(ctx)
	if !ok || s.start == nil {
		idem.WriteProblem(w, idem.Problem{Status: http.StatusServiceUnavailable, Code: "signups_unavailable", Detail: "Signups are not running."})
		return
	}
	id := SignupOperationID(info.KeyDigest)
	if err := s.start(ctx, id, in, "idem:"+info.KeyID); err != nil {
		s.log.Error("demo: start signup", "operation_id", id, "error", err.Error())
		idem.WriteProblem(w, idem.Problem{Status: http.StatusServiceUnavailable, Code: "signup_not_started",
			Detail: "The signup could not be recorded; nothing was started. Retry with the same key."})
		return
	}
	_ = idem.Annotate(ctx, idem.Annotation{CorrelationID: id, ResourceIDs: []string{"operation:" + id}})
	w.Header().Set("Location", "/shop/signups/"+id)
	writeJSON(w, http.StatusAccepted, map[string]string{"operation_id": id})
}

// SignupStep is one step of a signup as GET /shop/signups/{id} shows it.
type SignupStep struct {
	Name                 string `json:"name"`
	Kind                 string `json:"kind"`
	System               string `json:"system"`
	Status               string `json:"status"`
	Attempts             int    `json:"attempts"`
	MaxAttempts          int    `json:"max_attempts"`
	Verifications        int    `json:"verifications"`
	IdempotencyKey       string `json:"idempotency_key"`
	ExternalID           string `json:"external_id"`
	LastError            string `json:"last_error"`
	LastErrorClass       string `json:"last_error_class"`
	CompensationStatus   string `json:"compensation_status"`
	CompensationAttempts int    `json:"compensation_attempts"`
	CompensationError    string `json:"compensation_error"`
}

// SignupView is GET /shop/signups/{id}.
type SignupView struct {
	OperationID  string       `json:"operation_id"`
	Type         string       `json:"type"`
	Status       string       `json:"status"`
	CurrentStep  string       `json:"current_step"`
	ReviewReason string       `json:"review_reason"`
	LastError    string       `json:"last_error"`
	Version      int64        `json:"version"`
	Email        string       `json:"email"`
	Fail         string       `json:"fail"`
	CreatedAt    time.Time    `json:"created_at"`
	UpdatedAt    time.Time    `json:"updated_at"`
	FinishedAt   *time.Time   `json:"finished_at"`
	Account      *Account     `json:"account"`
	Steps        []SignupStep `json:"steps"`
}

func (s *Signups) handleGet(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := chi.URLParam(r, "operation_id")
	if s.get == nil {
		idem.WriteProblem(w, idem.Problem{Status: http.StatusServiceUnavailable, Code: "signups_unavailable", Detail: "Signups are not running."})
		return
	}
	op, err := s.get(ctx, id)
	if errors.Is(err, saga.ErrNotFound) || (err == nil && op.Type != SignupType) {
		idem.WriteProblem(w, idem.Problem{Status: http.StatusNotFound, Code: "signup_not_found", Detail: "No signup " + id + "."})
		return
	}
	if err != nil {
		s.log.Error("demo: read signup", "operation_id", id, "error", err.Error())
		idem.WriteProblem(w, idem.Problem{Status: http.StatusServiceUnavailable, Code: "store_unavailable", Detail: "The signup cannot be read now."})
		return
	}
	var in SignupInput
	_ = json.Unmarshal(op.Input, &in)
	v := SignupView{OperationID: op.ID, Type: op.Type, Status: string(op.Status), CurrentStep: op.CurrentStep, ReviewReason: op.ReviewReason,
		LastError: op.LastError, Version: op.Version, Email: in.Email, Fail: in.Fail, CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt,
		FinishedAt: op.FinishedAt, Steps: make([]SignupStep, 0, len(op.Steps))}
	for _, st := range op.Steps {
		v.Steps = append(v.Steps, SignupStep{Name: st.Name, Kind: string(st.Kind), System: st.System, Status: string(st.Status),
			Attempts: st.Attempts, MaxAttempts: st.MaxAttempts, Verifications: st.Verifications, IdempotencyKey: st.Key,
			ExternalID: st.ExternalID, LastError: st.LastError, LastErrorClass: string(st.LastErrorClass),
			CompensationStatus: string(st.CompStatus), CompensationAttempts: st.CompAttempts, CompensationError: st.CompError})
	}
	var a Account
	ok, err := s.db.QueryRow(ctx, `SELECT id, email, status, operation_id, created_at, closed_at FROM demo_account WHERE key = $1`,
		[]any{op.ID + "/account"}, &a.ID, &a.Email, &a.Status, &a.OperationID, &a.CreatedAt, &a.ClosedAt)
	if err != nil {
		s.log.Error("demo: read account", "operation_id", id, "error", err.Error())
		idem.WriteProblem(w, idem.Problem{Status: http.StatusServiceUnavailable, Code: "store_unavailable", Detail: "The signup cannot be read now."})
		return
	}
	if ok {
		v.Account = &a
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Signups) handleProviderState(w http.ResponseWriter, r *http.Request) {
	st := s.shop.provider.State()
	ws, err := s.workspaces.List(r.Context())
	if err != nil {
		idem.WriteProblem(w, idem.Problem{Status: http.StatusBadGateway, Code: "provider_error", Detail: "The workspace provider cannot be read: " + err.Error() + "."})
		return
	}
	st.Workspaces = ws
	if st.Workspaces == nil {
		st.Workspaces = []Workspace{}
	}
	writeJSON(w, http.StatusOK, st)
}

// SignupOperation is the operation of the signups' idempotency records.
const SignupOperation = "POST /shop/signups"

// Verifier is the signups' verifier (SPEC K19): a signup request's effect
// is its saga operation, whose ID derives from the record's key digest;
// it happened when the operation exists.
func (s *Signups) Verifier() idem.Verifier {
	return idem.VerifierFunc(func(ctx context.Context, a idem.Abandoned) (idem.Verification, error) {
		if s.get == nil {
			return idem.Verification{}, errors.New("demo: signups are not running")
		}
		id := SignupOperationID(a.KeyDigest)
		op, err := s.get(ctx, id)
		switch {
		case errors.Is(err, saga.ErrNotFound) || (err == nil && op.Type != SignupType):
			return idem.Verification{Verdict: idem.VerdictNotHappened, Evidence: "no signup operation " + id}, nil
		case err != nil:
			return idem.Verification{}, err
		}
		return idem.Verification{Verdict: idem.VerdictHappened, ExternalRef: id, Evidence: "signup operation " + id + " is " + string(op.Status)}, nil
	})
}
