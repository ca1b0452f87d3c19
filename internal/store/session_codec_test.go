package store

import (
	"math"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/stretchr/testify/require"
)

// Issue 12: the console's session codec round-trips every value type the
// console and scs store, encodes one session to the same bytes every time
// (map order), reads sessions that scs's gob codec wrote, falls back to gob
// for other types, and refuses damaged input without panicking.
func TestSessionCodec(t *testing.T) {
	var c SessionCodec
	deadline := time.Date(2026, 12, 2, 10, 0, 0, 123, time.UTC)
	values := map[string]any{
		SessionUserKey: int64(42), "role": "oncall", "sso_state": "st-…-ü", "__rememberMe": true, "n": -7,
		"f": math.Pi, "raw": []byte{0, 1, 255}, "at": time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600)),
		"empty": "", "no": false, "min": int64(math.MinInt64),
	}
	b, err := c.Encode(deadline, values)
	require.NoError(t, err)
	require.Equal(t, byte(sessionCodecMagic), b[0])
	for range 20 { // a map's order is random each time
		again, err := c.Encode(deadline, values)
		require.NoError(t, err)
		require.Equal(t, b, again)
	}
	gotDeadline, got, err := c.Decode(b)
	require.NoError(t, err)
	require.True(t, gotDeadline.Equal(deadline))
	require.Len(t, got, len(values))
	for k, v := range values {
		if tm, ok := v.(time.Time); ok {
			require.True(t, tm.Equal(got[k].(time.Time)), k)
			continue
		}
		require.Equal(t, v, got[k], k)
	}
	require.Equal(t, int64(42), *sessionUserID(b))

	// Written by scs's gob codec (sessions of earlier versions): read.
	old, err := scs.GobCodec{}.Encode(deadline, map[string]any{SessionUserKey: int64(7), "role": "admin"})
	require.NoError(t, err)
	_, got, err = c.Decode(old)
	require.NoError(t, err)
	require.Equal(t, map[string]any{SessionUserKey: int64(7), "role": "admin"}, got)
	require.Equal(t, int64(7), *sessionUserID(old))

	// A value of another type: the whole session in gob, read back.
	gobbed, err := c.Encode(deadline, map[string]any{"x": []string{"a"}})
	require.NoError(t, err)
	require.NotEqual(t, byte(sessionCodecMagic), gobbed[0])
	_, got, err = c.Decode(gobbed)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, got["x"])

	// Equal sessions are the same session, whatever the form.
	require.True(t, sameSession(b, b))
	require.False(t, sameSession(b, old))

	// Damaged: every truncation and a trailing byte are errors, not panics.
	for n := 1; n < len(b); n++ {
		_, _, err := c.Decode(b[:n])
		require.Error(t, err, "truncated to %d bytes", n)
	}
	_, _, err = c.Decode(append(append([]byte{}, b...), 0))
	require.Error(t, err)
	_, _, err = c.Decode([]byte{sessionCodecMagic, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	require.Error(t, err)
	require.Nil(t, sessionUserID([]byte{sessionCodecMagic}))
}

// FuzzSessionCodec: no input makes Decode panic, and what it accepts
// encodes to bytes it decodes to the same values.
func FuzzSessionCodec(f *testing.F) {
	b, _ := SessionCodec{}.Encode(time.Unix(1, 0), map[string]any{"a": "b", "n": int64(1), "t": true})
	f.Add(b)
	f.Add([]byte{sessionCodecMagic})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 || in[0] != sessionCodecMagic {
			return // gob's own decoder
		}
		d, vals, err := SessionCodec{}.Decode(in)
		if err != nil {
			return
		}
		again, err := SessionCodec{}.Encode(d, vals)
		require.NoError(t, err)
		d2, vals2, err := SessionCodec{}.Decode(again)
		require.NoError(t, err)
		require.True(t, d.Equal(d2))
		require.Equal(t, len(vals), len(vals2))
	})
}
