package decision

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// CloudEvents attributes of the console's decision webhooks.
const (
	// CloudEventsVersion is the CloudEvents specification version the
	// webhooks' bodies follow (structured JSON mode).
	CloudEventsVersion = "1.0"
	// CloudEventTypePrefix precedes an Event.Type in a CloudEvent's type:
	// "dev.unstuck.decision.key.confirmed".
	CloudEventTypePrefix = "dev.unstuck.decision."
	// DefaultSource is a CloudEvent's source when the console's URL is not
	// configured.
	DefaultSource = "unstuck-console"
	// SignatureHeader is the HTTP header that carries a webhook's
	// signature: "t=<unix seconds>,v1=<hex HMAC-SHA256>".
	SignatureHeader = "Unstuck-Signature"
	// ContentType is a webhook body's media type.
	ContentType = "application/cloudevents+json"
)

// CloudEvent is the body of a decision webhook: a CloudEvents 1.0
// structured JSON envelope whose data is the [Event], encoded as the River
// job's args are.
type CloudEvent struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	Data            Event     `json:"data"`
}

// NewCloudEvent wraps ev: its ID and time, the type CloudEventTypePrefix
// + ev.Type, source ("" is DefaultSource).
func NewCloudEvent(source string, ev Event) CloudEvent {
	if source == "" {
		source = DefaultSource
	}
	return CloudEvent{SpecVersion: CloudEventsVersion, ID: ev.ID, Source: source, Type: CloudEventTypePrefix + ev.Type,
		Time: ev.Time, DataContentType: "application/json", Data: ev}
}

// Sign returns the SignatureHeader value of body sent at t: t's Unix
// seconds and the hex HMAC-SHA256 under secret of "<seconds>.<body>".
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(signature(secret, ts, body))
}

func signature(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// Errors of [VerifySignature].
var (
	// ErrSignatureHeader: the header is missing or not t=…,v1=….
	ErrSignatureHeader = errors.New("decision: malformed " + SignatureHeader + " header")
	// ErrSignatureMismatch: no v1 signature is the body's under the
	// secret (a tampered body, or another secret).
	ErrSignatureMismatch = errors.New("decision: webhook signature does not match")
	// ErrSignatureExpired: the signed time is further than the tolerance
	// from now (a replayed request).
	ErrSignatureExpired = errors.New("decision: webhook signature outside the tolerance")
)

// VerifySignature checks header, a webhook's SignatureHeader value,
// against body, the request's body as received (before any JSON
// decoding), and secret: one of its v1 signatures must be the HMAC-SHA256
// of "<t>.<body>" (compared in constant time), and t within tolerance of
// now (tolerance <= 0 skips that check; 5 minutes is a sensible value).
// It returns nil or one of the ErrSignature… errors.
func VerifySignature(secret []byte, header string, body []byte, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrSignatureHeader
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil {
				return ErrSignatureHeader
			}
			sigs = append(sigs, sig)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrSignatureHeader
	}
	want := signature(secret, ts, body)
	ok := false
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			ok = true
		}
	}
	if !ok {
		return ErrSignatureMismatch
	}
	if tolerance > 0 {
		if d := time.Since(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
			return ErrSignatureExpired
		}
	}
	return nil
}
