// Package auth holds the console's password hashing and sign-in rate
// limiting.
package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

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

// ValidatePassword reports why a new password is not acceptable.
func ValidatePassword(pw string) error {
	switch {
	case len(pw) < MinPasswordLength:
		return fmt.Errorf("password must have at least %d characters", MinPasswordLength)
	case len(pw) > MaxPasswordLength:
		return fmt.Errorf("password must have at most %d characters", MaxPasswordLength)
	}
	return nil
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
