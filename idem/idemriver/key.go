package idemriver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/unstuckhq/unstuck/idem"
)

// Metadata fields that carry a job's idempotency key. The key is stored in
// clear in River's job table; see the package documentation.
const (
	MetadataKey   = "idempotency_key"
	MetadataScope = "idempotency_scope"
)

// OperationPrefix starts the operation name of every key used by a job.
const OperationPrefix = "river:"

// Keyed is implemented by job args that carry an idempotency key. The
// insert side of [Middleware] calls IdempotencyKey on the args given to
// Insert (so implement it on the type passed there, usually the value
// type) and stores the result in the job's metadata. An empty key means
// that the job has none and runs untouched; a non-empty key needs a
// non-empty scope, both at most 255 bytes, or the insert fails.
//
// Jobs with the same key must have the same args (compared as canonical
// JSON): a job whose args differ is cancelled as a key reuse. Keep
// per-delivery data (a delivery id, an attempt number, a receipt time) out
// of the args of keyed jobs.
type Keyed interface {
	IdempotencyKey() (key, scope string)
}

// Operation returns the operation name under which the keys of jobs of
// kind are recorded: "river:" followed by the kind. Use it with
// [idem.Engine.ForgetOperation] to forget a job's key.
func Operation(kind string) string { return OperationPrefix + kind }

// InsertOpts returns a copy of opts (nil is taken as empty options) whose
// metadata carries key and scope, for args that do not implement [Keyed].
// Metadata already in opts is kept; it must be a JSON object. The key and
// scope are validated as [idem.Run] would: an error matching
// [idem.ErrInvalidKey] says which is wrong. The key is stored in clear in
// River's job table (see the package documentation).
func InsertOpts(opts *river.InsertOpts, key, scope string) (*river.InsertOpts, error) {
	var out river.InsertOpts
	if opts != nil {
		out = *opts
	}
	md, err := setKey(out.Metadata, key, scope)
	if err != nil {
		return nil, err
	}
	out.Metadata = md
	return &out, nil
}

// setKey returns metadata with key and scope set, after validating them.
func setKey(metadata []byte, key, scope string) ([]byte, error) {
	if err := validateKey(key, scope); err != nil {
		return nil, err
	}
	fields := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(metadata)) > 0 {
		if err := json.Unmarshal(metadata, &fields); err != nil {
			return nil, fmt.Errorf("idemriver: job metadata is not a JSON object: %w", err)
		}
		if fields == nil { // the metadata was JSON null
			fields = map[string]json.RawMessage{}
		}
	}
	var err error
	if fields[MetadataKey], err = json.Marshal(key); err != nil {
		return nil, fmt.Errorf("idemriver: encode key: %w", err)
	}
	if fields[MetadataScope], err = json.Marshal(scope); err != nil {
		return nil, fmt.Errorf("idemriver: encode scope: %w", err)
	}
	md, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("idemriver: encode metadata: %w", err)
	}
	return md, nil
}

// keyFrom reads the key and scope from a job's metadata. ok is false when
// the metadata carries no key. A key that is present but malformed or out
// of range is an error matching idem.ErrInvalidKey.
func keyFrom(metadata []byte) (key, scope string, ok bool, err error) {
	if len(bytes.TrimSpace(metadata)) == 0 {
		return "", "", false, nil
	}
	var fields struct {
		Key   *json.RawMessage `json:"idempotency_key"`
		Scope *json.RawMessage `json:"idempotency_scope"`
	}
	if err := json.Unmarshal(metadata, &fields); err != nil {
		return "", "", false, &idem.ValidationError{Field: "key", Reason: "job metadata is not a JSON object"}
	}
	if fields.Key == nil {
		return "", "", false, nil
	}
	if err := json.Unmarshal(*fields.Key, &key); err != nil {
		return "", "", false, &idem.ValidationError{Field: "key", Reason: "metadata " + MetadataKey + " is not a string"}
	}
	if fields.Scope != nil {
		if err := json.Unmarshal(*fields.Scope, &scope); err != nil {
			return "", "", false, &idem.ValidationError{Field: "scope", Reason: "metadata " + MetadataScope + " is not a string"}
		}
	}
	if err := validateKey(key, scope); err != nil {
		return "", "", false, err
	}
	return key, scope, true, nil
}

// validateKey applies idem's limits on a key and its scope (SPEC R2).
func validateKey(key, scope string) error {
	switch {
	case key == "":
		return &idem.ValidationError{Field: "key", Reason: "empty"}
	case len(key) > idem.MaxKeyBytes:
		return &idem.ValidationError{Field: "key", Reason: fmt.Sprintf("%d bytes, at most %d allowed", len(key), idem.MaxKeyBytes)}
	case scope == "":
		return &idem.ValidationError{Field: "scope", Reason: "empty"}
	case len(scope) > idem.MaxScopeBytes:
		return &idem.ValidationError{Field: "scope", Reason: fmt.Sprintf("%d bytes, at most %d allowed", len(scope), idem.MaxScopeBytes)}
	}
	return nil
}

// validateKind checks that the operation name of kind fits idem's limit,
// so that a bad kind fails at insert rather than at every delivery.
func validateKind(kind string) error {
	if len(Operation(kind)) > idem.MaxScopeBytes {
		return &idem.ValidationError{Field: "operation", Reason: fmt.Sprintf("job kind %q is too long for an operation name", kind)}
	}
	return nil
}

// fingerprint is the hex SHA-256 of the canonical form of a job's encoded
// args: decoded and encoded again, so that object keys are sorted and
// whitespace is gone whatever the database did to the JSON (PostgreSQL's
// jsonb reorders keys and adds spaces). Numbers keep their literal text.
func fingerprint(encodedArgs []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(encodedArgs))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("idemriver: job args are not JSON: %w", err)
	}
	if dec.More() {
		return "", errors.New("idemriver: job args hold more than one JSON value")
	}
	canonical, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("idemriver: job args: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:]), nil
}
