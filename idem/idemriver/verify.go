package idemriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/unstuckhq/unstuck/idem"
)

// VerifyQueue is the River queue of verification jobs: an operations
// console inserts them on the application's River tables, and the
// application's workers run them ([AddVerifyWorker] adds the queue).
const VerifyQueue = "unstuck_verify"

// VerifyKind is the kind of a verification job.
const VerifyKind = "unstuck.verify_key"

// VerifyArgs asks the application's verifier of a key's operation whether
// the key's effect happened (SPEC K19). An operations console inserts it
// for a key whose outcome is unknown; the application runs it with a
// [VerifyWorker] and records the answer as the job's output
// ([VerifyAnswer], river.RecordOutput), which the console reads to decide.
type VerifyArgs struct {
	// RecordID and Version are the key record the operator asked about,
	// as the console saw it.
	RecordID int64 `json:"record_id" river:"unique"`
	Version  int64 `json:"version" river:"unique"`
	// The record's identity and what it carries, for the verifier.
	Scope         string    `json:"scope"`
	Operation     string    `json:"operation"`
	KeyDigest     string    `json:"key_digest"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	ExternalRef   string    `json:"external_ref,omitempty"`
	ResourceIDs   []string  `json:"resource_ids,omitempty"`
	Fence         int64     `json:"fence"`
	Attempt       int       `json:"attempt"`
	FirstSeenAt   time.Time `json:"first_seen_at"`
	// RequestedBy is the operator who asked, for logs.
	RequestedBy string `json:"requested_by,omitempty"`
}

// Kind is [VerifyKind].
func (VerifyArgs) Kind() string { return VerifyKind }

// InsertOpts puts the job on [VerifyQueue], once per record version: the
// same request twice, by one operator or two, is one job while the first
// is waiting or running. A job whose process died is rescued by the
// application's River leader and run again (up to 5 attempts).
func (VerifyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: VerifyQueue, MaxAttempts: 5,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
			rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
			rivertype.JobStateRetryable, rivertype.JobStateScheduled}}}
}

// Verdicts of a [VerifyAnswer].
const (
	AnswerHappened    = "happened"
	AnswerNotHappened = "not_happened"
	AnswerUnknown     = "unknown"
	// AnswerNoVerifier: the application registered no verifier for the
	// key's operation.
	AnswerNoVerifier = "no_verifier"
)

// MaxEvidence bounds a [VerifyAnswer]'s Evidence and Error, in bytes.
const MaxEvidence = 1000

// VerifyAnswer is a verification's outcome, recorded as its job's output.
type VerifyAnswer struct {
	// Verdict is one of the Answer… constants.
	Verdict string `json:"verdict"`
	// ExternalRef is the receiver's reference of the effect, for
	// happened (the verifier's, else the record's).
	ExternalRef string `json:"external_ref,omitempty"`
	// Evidence is what the receiver showed ([idem.Verification].Evidence),
	// cut at MaxEvidence bytes: untrusted text.
	Evidence string `json:"evidence,omitempty"`
	// Verifier is the registered verifier's name.
	Verifier string `json:"verifier,omitempty"`
	// Error says why the verdict is unknown when the verifier failed:
	// "timeout", "panic", "error: …" or "invalid answer: …".
	Error string `json:"error,omitempty"`
	// At is when the verifier answered.
	At time.Time `json:"at"`
}

// VerifyWorker runs the verifiers an application registered, one per
// operation, for the verification jobs a console inserts (SPEC K19). A
// verifier that panics, hangs past the timeout or answers nonsense yields
// [AnswerUnknown] with the reason, never a decision; the job completes, so
// River does not retry a verifier that answered. A verifier that ignores
// its context's end is abandoned at the timeout: its goroutine runs on
// until it returns.
type VerifyWorker struct {
	river.WorkerDefaults[VerifyArgs]
	mu        sync.RWMutex
	verifiers map[string]namedVerifier
	timeout   time.Duration
}

type namedVerifier struct {
	name string
	v    idem.Verifier
}

// NewVerifyWorker returns a worker without verifiers, whose verifier calls
// are bounded by timeout (30 s when 0 or less).
func NewVerifyWorker(timeout time.Duration) *VerifyWorker {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &VerifyWorker{verifiers: map[string]namedVerifier{}, timeout: timeout}
}

// Register makes v, called name in the console, the verifier of the keys
// of operation (the record's operation, e.g. "POST /payments" for a route
// of the HTTP middleware, [Operation] of a job kind). It is the same
// [idem.Verifier] that [idem.RecoverByVerifying] takes.
func (w *VerifyWorker) Register(operation, name string, v idem.Verifier) error {
	if operation == "" || name == "" || v == nil {
		return errors.New("idemriver: a verifier needs an operation, a name and a Verifier")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.verifiers[operation] = namedVerifier{name: name, v: v}
	return nil
}

// Timeout is the bound of one verifier call, and the job's timeout beyond it.
func (w *VerifyWorker) Timeout(*river.Job[VerifyArgs]) time.Duration {
	return w.timeout + 10*time.Second
}

// Work runs the verifier of the job's operation and records its answer.
func (w *VerifyWorker) Work(ctx context.Context, job *river.Job[VerifyArgs]) error {
	return river.RecordOutput(ctx, w.Answer(ctx, job.Args))
}

// Answer runs the verifier of a's operation, bounded by the worker's
// timeout, and returns its answer.
func (w *VerifyWorker) Answer(ctx context.Context, a VerifyArgs) VerifyAnswer {
	w.mu.RLock()
	nv, ok := w.verifiers[a.Operation]
	w.mu.RUnlock()
	if !ok {
		return VerifyAnswer{Verdict: AnswerNoVerifier, At: time.Now().UTC()}
	}
	ans := VerifyAnswer{Verifier: nv.name}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	type result struct {
		v   idem.Verification
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{err: errPanic}
			}
		}()
		v, err := nv.v.Verify(ctx, idem.Abandoned{KeyID: idem.SafeKeyID(a.KeyDigest), KeyDigest: a.KeyDigest, Scope: a.Scope,
			Operation: a.Operation, CorrelationID: a.CorrelationID, ExternalRef: a.ExternalRef, ResourceIDs: a.ResourceIDs,
			Fence: a.Fence, Attempt: a.Attempt, FirstSeenAt: a.FirstSeenAt})
		done <- result{v, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		r.err = errTimeout
	}
	ans.At = time.Now().UTC()
	ans.Evidence = bounded(r.v.Evidence)
	switch {
	case errors.Is(r.err, errTimeout):
		ans.Verdict, ans.Error = AnswerUnknown, "timeout"
	case errors.Is(r.err, errPanic):
		ans.Verdict, ans.Error = AnswerUnknown, "panic"
	case r.err != nil:
		ans.Verdict, ans.Error = AnswerUnknown, bounded("error: "+r.err.Error())
	case r.v.Verdict == idem.VerdictHappened:
		ans.Verdict, ans.ExternalRef = AnswerHappened, strings.TrimSpace(r.v.ExternalRef)
		if ans.ExternalRef == "" {
			ans.ExternalRef = a.ExternalRef
		}
		if ans.ExternalRef == "" || len(ans.ExternalRef) > 255 || !utf8.ValidString(ans.ExternalRef) {
			ans.Verdict, ans.ExternalRef, ans.Error = AnswerUnknown, "", "invalid answer: happened, without a usable reference"
		}
	case r.v.Verdict == idem.VerdictNotHappened:
		ans.Verdict = AnswerNotHappened
	case r.v.Verdict == idem.VerdictUnknown:
		ans.Verdict = AnswerUnknown
	default:
		ans.Verdict, ans.Error = AnswerUnknown, fmt.Sprintf("invalid answer: verdict %d", r.v.Verdict)
	}
	return ans
}

var (
	errTimeout = errors.New("timeout")
	errPanic   = errors.New("panic")
)

// bounded is s as valid UTF-8, at most MaxEvidence bytes.
func bounded(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxEvidence {
		return s
	}
	cut := MaxEvidence
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// AddVerifyWorker adds w to workers and its queue, [VerifyQueue], to cfg
// (5 workers unless cfg already configures it). Call it on the River
// client of an application whose keys a console may ask to verify.
func AddVerifyWorker(workers *river.Workers, cfg *river.Config, w *VerifyWorker) error {
	if cfg.Queues == nil {
		cfg.Queues = map[string]river.QueueConfig{}
	}
	if _, ok := cfg.Queues[VerifyQueue]; !ok {
		cfg.Queues[VerifyQueue] = river.QueueConfig{MaxWorkers: 5}
	}
	return river.AddWorkerSafely(workers, w)
}
