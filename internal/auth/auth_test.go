package auth

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

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
	require.NoError(t, ValidatePassword("correct horse battery"))
	pw, err := GeneratePassword()
	require.NoError(t, err)
	require.Len(t, pw, 20)
	require.NoError(t, ValidatePassword(pw))
}

// TestPasswordRuleIsMoreThanLength: the rule is more than a length:
// all-whitespace and common passwords are refused (SPEC K5).
func TestPasswordRuleIsMoreThanLength(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		strings.Repeat(" ", 16), "\t\t\t\n\n\n            ", // only whitespace
		"password1234", "Password1234!", "  iloveyou2024", "qwertyuiop12", "1qaz2wsx!!!!", "Sunshine#2026", // common ones padded
		"qwertyqwerty", "abcabcabcabc", "aaaaaaaaaaaaaaaa", "123123123123", // repeated
		"123456789012", "abcdefghijklm", "987654321098", // consecutive
	} {
		require.Error(t, ValidatePassword(bad), "%q", bad)
	}
	for _, good := range []string{"correct horse battery", "tr0ub4dor&3-staple", "sunshine over the hills"} {
		require.NoError(t, ValidatePassword(good), "%q", good)
	}
	require.Greater(t, len(commonPasswords()), 900, "the embedded list is read")
}

func TestLimiterWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := NewLimiter(3, 15*time.Minute)
	l.now = func() time.Time { return now }
	for range 3 {
		ok, _ := l.Reserve("10.0.0.1")
		require.True(t, ok)
		now = now.Add(time.Minute)
	}
	ok, wait := l.Reserve("10.0.0.1")
	require.False(t, ok)
	require.Equal(t, 12*time.Minute, wait, "until the oldest attempt leaves the window")
	ok, _ = l.Reserve("10.0.0.2")
	require.True(t, ok, "keys are limited apart")
	l.Release("10.0.0.1") // a success is taken back
	ok, _ = l.Reserve("10.0.0.1")
	require.True(t, ok)
	ok, _ = l.Reserve("10.0.0.1")
	require.False(t, ok)
	now = now.Add(12 * time.Minute)
	ok, _ = l.Reserve("10.0.0.1")
	require.True(t, ok, "the window slid")
}

// TestLimitersCountBeforeVerifying: the check and the count are one step
// (a reservation counts at once), so 15 parallel wrong passwords against a
// limit of 5 are not all verified (SPEC K8).
func TestLimitersCountBeforeVerifying(t *testing.T) {
	t.Parallel()
	l := NewLimiter(5, time.Minute)
	b := NewBackoff(5, time.Minute, time.Hour, time.Hour)
	var window, backoff atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 15 {
		wg.Go(func() {
			<-start
			if ok, _ := l.Reserve("addr"); ok {
				window.Add(1)
			}
			if ok, _ := b.Reserve("ada\x00addr", time.Time{}); ok {
				backoff.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	require.EqualValues(t, 5, window.Load())
	require.EqualValues(t, 5, backoff.Load())
}

// TestBackoffIsExponentialAndForgets: no hard lock: the
// waits double from Base up to Max, an unlock (the account changed after
// the first failure) and a success clear them, and a quiet key is
// forgotten.
func TestBackoffIsExponentialAndForgets(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	start := now
	b := NewBackoff(3, 30*time.Second, 4*time.Minute, time.Hour)
	b.now = func() time.Time { return now }
	for range 3 {
		ok, _ := b.Reserve("ada", time.Time{})
		require.True(t, ok, "the first attempts are free")
	}
	var waits []time.Duration
	for range 6 {
		ok, wait := b.Reserve("ada", time.Time{})
		require.False(t, ok)
		waits = append(waits, wait)
		now = now.Add(wait)
		ok, _ = b.Reserve("ada", time.Time{})
		require.True(t, ok, "after the wait one more attempt")
	}
	require.Equal(t, []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 4 * time.Minute, 4 * time.Minute}, waits)

	ok, _ := b.Reserve("ada", start.Add(-time.Second))
	require.False(t, ok, "a change before the failures clears nothing")
	ok, _ = b.Reserve("ada", now)
	require.True(t, ok, "an unlock after the first failure clears them")
	b.Reset("ada")
	for range 3 {
		ok, _ = b.Reserve("ada", time.Time{})
		require.True(t, ok)
	}
	b.Release("ada") // an attempt that was never made is taken back
	ok, _ = b.Reserve("ada", time.Time{})
	require.True(t, ok)
	ok, _ = b.Reserve("ada", time.Time{})
	require.False(t, ok)
	now = now.Add(time.Hour + time.Minute)
	ok, _ = b.Reserve("ada", time.Time{})
	require.True(t, ok, "forgotten after an hour without failures")
	ok, _ = b.Reserve("bob", time.Time{})
	require.True(t, ok, "keys are throttled apart")
}

func TestGateCapsConcurrentHashing(t *testing.T) {
	t.Parallel()
	g := NewGate(2, 20*time.Millisecond)
	leave1, ok := g.Enter(t.Context())
	require.True(t, ok)
	leave2, ok := g.Enter(t.Context())
	require.True(t, ok)
	_, ok = g.Enter(t.Context())
	require.False(t, ok, "a third waits briefly, then is refused")
	leave1()
	leave3, ok := g.Enter(t.Context())
	require.True(t, ok, "a slot given back is taken")
	leave2()
	leave3()
}

func TestLogName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "ada", LogName("ada"))
	require.Equal(t, "ada?evil?x", LogName("ada\nevil\x00x"))
	require.Equal(t, "a?b", LogName("a\xffb"))
	long := LogName(strings.Repeat("é", 100))
	require.LessOrEqual(t, len(long), MaxLogName+len("…"))
	require.True(t, utf8.ValidString(long))
	require.True(t, strings.HasSuffix(long, "…"))
}

func TestLimiterForgetsExpiredKeys(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := NewLimiter(5, time.Minute)
	l.now = func() time.Time { return now }
	b := NewBackoff(5, time.Second, time.Second, time.Minute)
	b.now = l.now
	for i := range 5000 {
		l.Reserve(fmt.Sprintf("guess-%d", i))
		b.Reserve(fmt.Sprintf("guess-%d", i), time.Time{})
		if i%100 == 99 {
			now = now.Add(2 * time.Minute) // the earlier guesses leave the window
		}
	}
	require.Less(t, len(l.entries), 2*minSweep+100, "expired keys are swept: %d kept", len(l.entries))
	require.Less(t, len(b.entries), 2*minSweep+100, "expired keys are swept: %d kept", len(b.entries))
}
