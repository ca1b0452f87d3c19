package auth

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHashAndVerify(t *testing.T) {
	t.Parallel()
	h, err := Hash("correct horse battery")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$"), h)
	require.NoError(t, Verify(h, "correct horse battery"))
	require.ErrorIs(t, Verify(h, "correct horse battery!"), ErrMismatch)
	require.ErrorIs(t, Verify(h, strings.Repeat("x", MaxPasswordLength+1)), ErrMismatch)
	other, err := Hash("correct horse battery")
	require.NoError(t, err)
	require.NotEqual(t, h, other, "a fresh salt per hash")
	for _, bad := range []string{"", "$bcrypt$x", "$argon2id$v=19$m=0,t=2,p=1$c2FsdA$a2V5", "$argon2id$v=19$m=19456,t=2,p=1$!!$a2V5"} {
		err := Verify(bad, "pw")
		require.Error(t, err, bad)
		require.NotErrorIs(t, err, ErrMismatch, "an unreadable hash is not a wrong password: %q", bad)
	}
}

func TestValidateAndGeneratePassword(t *testing.T) {
	t.Parallel()
	require.Error(t, ValidatePassword("short"))
	require.Error(t, ValidatePassword(strings.Repeat("x", MaxPasswordLength+1)))
	require.NoError(t, ValidatePassword("twelve chars"))
	pw, err := GeneratePassword()
	require.NoError(t, err)
	require.Len(t, pw, 20)
	require.NoError(t, ValidatePassword(pw))
}

func TestLimiterWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := NewLimiter(3, 15*time.Minute)
	l.now = func() time.Time { return now }
	for range 3 {
		ok, _ := l.Allowed("ada")
		require.True(t, ok)
		l.Fail("ada")
		now = now.Add(time.Minute)
	}
	ok, wait := l.Allowed("ada")
	require.False(t, ok)
	require.Equal(t, 12*time.Minute, wait, "until the oldest failure leaves the window")
	ok, _ = l.Allowed("bob")
	require.True(t, ok, "keys are limited apart")
	now = now.Add(12 * time.Minute)
	ok, _ = l.Allowed("ada")
	require.True(t, ok, "the window slid")
	l.Fail("ada")
	l.Reset("ada")
	ok, _ = l.Allowed("ada")
	require.True(t, ok)
}

func TestLimiterForgetsExpiredKeys(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := NewLimiter(5, time.Minute)
	l.now = func() time.Time { return now }
	for i := range 5000 {
		l.Fail(fmt.Sprintf("guess-%d", i))
		if i%100 == 99 {
			now = now.Add(2 * time.Minute) // the earlier guesses leave the window
		}
	}
	require.Less(t, len(l.entries), 2*minSweep+100, "expired keys are swept: %d kept", len(l.entries))
}
