// Package auth holds the console's password hashing and sign-in rate
// limiting.
package auth

import (
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters: OWASP's recommendation (19 MiB, 2 passes, 1 lane).
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonKeyLen    = 32
	saltLen        = 16

	// MinPasswordLength is the shortest password accepted for an account.
	MinPasswordLength = 12
	// MaxPasswordLength bounds the work an attacker can ask of the hash.
	MaxPasswordLength = 256
)

// ErrMismatch is returned by Verify for a wrong password.
var ErrMismatch = errors.New("auth: password does not match")

// ValidatePassword reports why a new password is not acceptable: shorter
// than MinPasswordLength or longer than MaxPasswordLength bytes, only
// whitespace, one of the most common passwords with digits, spaces or
// symbols around it ("Password1234!"), one short unit repeated
// ("qwertyqwerty"), or a run of consecutive characters ("123456789012").
// Passwords are otherwise free: no composition rules (NIST SP 800-63B).
func ValidatePassword(pw string) error {
	switch {
	case len(pw) < MinPasswordLength:
		return fmt.Errorf("password must have at least %d characters", MinPasswordLength)
	case len(pw) > MaxPasswordLength:
		return fmt.Errorf("password must have at most %d characters", MaxPasswordLength)
	case strings.TrimSpace(pw) == "":
		return errors.New("password must not be only spaces")
	}
	lower := strings.ToLower(pw)
	switch {
	case common(lower):
		return errors.New("password is too common: choose one that is not in lists of common passwords")
	case repeated(lower):
		return errors.New("password must not be one short sequence repeated")
	case consecutive(lower):
		return errors.New("password must not be a run of consecutive characters")
	}
	return nil
}

//go:embed common_passwords.txt
var commonPasswordsText string

// commonPasswords is the set of common_passwords.txt.
var commonPasswords = sync.OnceValue(func() map[string]bool {
	set := map[string]bool{}
	for _, l := range strings.Split(commonPasswordsText, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			set[l] = true
		}
	}
	return set
})

// common reports whether pw, or its core without the digits, spaces and
// symbols around it, is a common password of at least 4 characters.
func common(pw string) bool {
	notLetter := func(r rune) bool { return !unicode.IsLetter(r) }
	notAlnum := func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }
	for _, core := range []string{pw, strings.TrimFunc(pw, notLetter), strings.TrimFunc(pw, notAlnum),
		strings.TrimRightFunc(pw, notLetter), strings.TrimLeftFunc(pw, notLetter)} {
		if len(core) >= 4 && commonPasswords()[core] {
			return true
		}
	}
	return false
}

// repeated reports whether s is a unit of at most half its length written
// over and over ("abcabcabcabc").
func repeated(s string) bool {
	for n := 1; n <= len(s)/2; n++ {
		if len(s)%n == 0 && strings.Repeat(s[:n], len(s)/n) == s {
			return true
		}
	}
	return false
}

// consecutive reports whether every byte of s follows the one before it,
// up or down ("abcdefghijkl", "987654321098"; digits wrap around).
func consecutive(s string) bool {
	step := func(a, b byte) int {
		d := int(b) - int(a)
		if '0' <= a && a <= '9' && '0' <= b && b <= '9' {
			d = (d + 10) % 10
			if d == 9 {
				d = -1
			}
		}
		return d
	}
	d := step(s[0], s[1])
	if d != 1 && d != -1 {
		return false
	}
	for i := 2; i < len(s); i++ {
		if step(s[i-1], s[i]) != d {
			return false
		}
	}
	return true
}

// Hash returns the argon2id hash of pw in PHC string form.
func Hash(pw string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("auth: salt: %w", err)
	}
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// Verify checks pw against a hash made by Hash, in constant time. It
// returns ErrMismatch for a wrong password and another error for a hash it
// cannot read.
func Verify(hash, pw string) error {
	if len(pw) > MaxPasswordLength {
		return ErrMismatch
	}
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return errors.New("auth: unknown hash format")
	}
	var version int
	var mem, iters uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return errors.New("auth: unknown argon2 version")
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &iters, &threads); err != nil || mem == 0 || iters == 0 || threads == 0 || mem > 1<<21 || iters > 64 {
		return errors.New("auth: bad argon2 parameters")
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return errors.New("auth: bad salt")
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(want) == 0 || len(want) > 128 {
		return errors.New("auth: bad key")
	}
	got := argon2.IDKey([]byte(pw), salt, iters, mem, threads, uint32(len(want)))
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return ErrMismatch
	}
	return nil
}

// GeneratePassword returns a random password of 20 characters from an
// alphabet without look-alikes.
func GeneratePassword() (string, error) {
	const alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b), nil
}
