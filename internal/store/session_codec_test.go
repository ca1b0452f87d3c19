package store

import (
	"math"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/stretchr/testify/require"
)

// The console's session codec writes scs's gob encoding (any
// console version reads it: rolling upgrades), round-trips every value
// type the console and scs store, encodes a session it has seen to the same
// bytes whatever the map's order, never hands out its memory for the
// caller to change, and stays bounded.
func TestSessionCodec(t *testing.T) {
	c := NewSessionCodec()
	deadline := time.Date(2026, 12, 2, 10, 0, 0, 123, time.UTC)
	values := map[string]any{
		SessionUserKey: int64(42), "role": "oncall", "sso_state": "st-…-ü", "__rememberMe": true, "n": -7,
		"f": math.Pi, "raw": []byte{0, 1, 255}, "empty": "", "no": false, "min": int64(math.MinInt64),
	}
	b, err := c.Encode(deadline, values)
	require.NoError(t, err)
	// Plain gob: what scs's own codec (and every earlier console) reads.
	gd, gv, err := scs.GobCodec{}.Decode(b)
	require.NoError(t, err)
	require.True(t, gd.Equal(deadline))
	require.Len(t, gv, len(values))

	for range 20 { // a map's order is random each time: the same bytes anyway
		again, err := c.Encode(deadline, values)
		require.NoError(t, err)
		require.Equal(t, b, again)
	}
	for _, codec := range []SessionCodec{c, NewSessionCodec(), {}} { // remembered, new memory, none
		gotDeadline, got, err := codec.Decode(b)
		require.NoError(t, err)
		require.True(t, gotDeadline.Equal(deadline))
		require.Len(t, got, len(values))
		require.Equal(t, values, got)
		got["role"] = "admin" // the caller's to change: not the memory's
		delete(got, SessionUserKey)
	}
	_, got, err := c.Decode(b)
	require.NoError(t, err)
	require.Equal(t, "oncall", got["role"])
	require.Equal(t, int64(42), got[SessionUserKey])

	// A changed session encodes anew, and decodes to its own values.
	changed := map[string]any{SessionUserKey: int64(42), "role": "admin"}
	b2, err := c.Encode(deadline, changed)
	require.NoError(t, err)
	require.NotEqual(t, b, b2)
	_, got, err = c.Decode(b2)
	require.NoError(t, err)
	require.Equal(t, changed, got)

	// Written by scs's gob codec elsewhere: decoded, then recognised.
	old, err := scs.GobCodec{}.Encode(deadline, map[string]any{SessionUserKey: int64(7), "role": "auditor", "x": "y"})
	require.NoError(t, err)
	_, got, err = c.Decode(old)
	require.NoError(t, err)
	require.Equal(t, map[string]any{SessionUserKey: int64(7), "role": "auditor", "x": "y"}, got)
	again, err := c.Encode(deadline, got)
	require.NoError(t, err)
	require.Equal(t, old, again, "a session decoded and unchanged encodes to the bytes it came from")

	// A value of another type: gob, not remembered, still correct.
	odd := map[string]any{"x": []string{"a"}}
	ob, err := c.Encode(deadline, odd)
	require.NoError(t, err)
	_, got, err = c.Decode(ob)
	require.NoError(t, err)
	require.Equal(t, odd, got)

	// Damaged input is an error, as scs's.
	_, _, err = c.Decode([]byte{1, 2, 3})
	require.Error(t, err)

	// Bounded: the memory forgets everything when full.
	for i := range sessionCodecMemory + 10 {
		_, err := c.Encode(deadline, map[string]any{SessionUserKey: int64(i)})
		require.NoError(t, err)
	}
	c.m.mu.Lock()
	require.LessOrEqual(t, len(c.m.byBytes), sessionCodecMemory)
	require.LessOrEqual(t, len(c.m.byValue), sessionCodecMemory)
	c.m.mu.Unlock()
}

// sessionKey tells sessions apart: no two different sessions share a key.
func TestSessionKeyTellsSessionsApart(t *testing.T) {
	at := time.Unix(100, 0)
	sessions := []map[string]any{
		{}, {"a": "b"}, {"a": "bc"}, {"ab": "c"}, {"a": int64(1)}, {"a": 1}, {"a": true}, {"a": false},
		{"a": 1.0}, {"a": []byte("b")}, {"a": time.Unix(1, 0)}, {"a": "b", "c": "d"}, {"a": "b\x01c", "": ""},
	}
	seen := map[string]int{}
	for i, s := range sessions {
		k, ok := sessionKey(at, s)
		require.True(t, ok)
		if j, dup := seen[k]; dup {
			t.Fatalf("sessions %d and %d share a key", j, i)
		}
		seen[k] = i
	}
	k1, _ := sessionKey(at, sessions[1])
	k2, _ := sessionKey(at.Add(time.Nanosecond), sessions[1])
	require.NotEqual(t, k1, k2, "the deadline is part of the key")
	_, ok := sessionKey(at, map[string]any{"x": struct{}{}})
	require.False(t, ok)
}
