package decision_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/decision"
)

func TestWebhookSignature(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	body := []byte(`{"specversion":"1.0","id":"dec_1"}`)
	now := time.Now()
	h := decision.Sign(secret, now, body)
	require.NoError(t, decision.VerifySignature(secret, h, body, 5*time.Minute))

	tampered := []byte(`{"specversion":"1.0","id":"dec_2"}`)
	require.ErrorIs(t, decision.VerifySignature(secret, h, tampered, 5*time.Minute), decision.ErrSignatureMismatch)
	require.ErrorIs(t, decision.VerifySignature([]byte("another secret, another secret!!"), h, body, 0), decision.ErrSignatureMismatch)

	old := decision.Sign(secret, now.Add(-time.Hour), body)
	require.ErrorIs(t, decision.VerifySignature(secret, old, body, 5*time.Minute), decision.ErrSignatureExpired)
	require.NoError(t, decision.VerifySignature(secret, old, body, 0), "no tolerance: the time is not checked")

	// A rotation: two v1 signatures, either may match.
	other := decision.Sign([]byte("the previous secret, at 32 bytes."), now, body)
	_, otherSig, _ := strings.Cut(other, ",")
	rotated := h + "," + otherSig
	require.NoError(t, decision.VerifySignature(secret, rotated, body, time.Minute))

	for _, bad := range []string{"", "t=1", "v1=00", "t=x,v1=00", "t=1,v1=zz", "garbage"} {
		require.ErrorIs(t, decision.VerifySignature(secret, bad, body, 0), decision.ErrSignatureHeader, bad)
	}
}

func TestWebhookCloudEvent(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 6, 3, 52, 44, 0, time.UTC)
	ev := decision.Event{ID: "dec_7", Type: decision.KeyConfirmed, Outcome: decision.Happened, Actor: "ada", Time: at,
		Subject: decision.Subject{Kind: decision.SubjectKey, ID: "9"}}
	body, err := json.Marshal(decision.NewCloudEvent("", ev))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, "1.0", got["specversion"])
	require.Equal(t, "dec_7", got["id"])
	require.Equal(t, "unstuck-console", got["source"])
	require.Equal(t, "dev.unstuck.decision.key.confirmed", got["type"])
	require.Equal(t, "2026-12-06T03:52:44Z", got["time"])
	require.Equal(t, "application/json", got["datacontenttype"])
	data, _ := json.Marshal(ev)
	var want map[string]any
	require.NoError(t, json.Unmarshal(data, &want))
	require.Equal(t, want, got["data"], "data is the event as the River job carries it")
}
