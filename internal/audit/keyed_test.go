package audit

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/migrate/migratepgx"
	"github.com/unstuckhq/unstuck/migrate/migratesqlite"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

func TestNewKeyring(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("k", MinKeyBytes))
	_, err := NewKeyring(key[:MinKeyBytes-1])
	require.ErrorContains(t, err, "at least 32")
	_, err = NewKeyring(key, []byte("short"))
	require.ErrorContains(t, err, "previous audit key 1")

	k, err := NewKeyring(key, key)
	require.NoError(t, err)
	require.Equal(t, KeyID(key), k.CurrentID())
	require.Regexp(t, `^[0-9a-f]{16}$`, k.CurrentID())
	require.NotContains(t, k.CurrentID(), fmt.Sprintf("%x", key[:8]), "the ID is a hash, not the key")
	require.NotEqual(t, KeyID(key), KeyID(append(key, 'x')))
}

// TestKeyedHashEncoding pins version 2 of the canonical encoding and its
// MAC: an entry MACed by an older build must keep verifying.
func TestKeyedHashEncoding(t *testing.T) {
	t.Parallel()
	e := Entry{
		Seq: 7, At: time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC), KeyID: testKeys.CurrentID(),
		Actor: "ada", Role: "oncall", Action: "key.forget", TargetKind: "key", TargetID: "42",
		Reason: "customer confirmed", Before: json.RawMessage(`{"v":1}`), After: nil, Outcome: "applied",
		RequestID: "r", ClientAddr: "192.0.2.1", UserAgent: "ua", PrevHash: make([]byte, 32),
	}
	require.Equal(t, "29eb0842abd6b549", e.KeyID)
	require.Equal(t, "f2da40b7e628b4c5a064a7c8d0b856bcf7a0c729ac187e2752715fd46cad8c87", fmt.Sprintf("%x", mustHash(t, e)))
	require.NotEqual(t, e.ComputeHash(), mustHash(t, e), "not the legacy SHA-256")
	other := e
	other.KeyID = "0123456789abcdef"
	_, err := testKeys.ComputeHash(other)
	require.ErrorIs(t, err, ErrUnknownKey)
}

func TestNoKey(t *testing.T) {
	t.Parallel()
	b := setupSQLite(t)
	b.append(t, entryOpts{})
	keyless := NewSQLite(b.sqlDB)
	_, err := keyless.Append(t.Context(), entry(entryOpts{}))
	require.ErrorIs(t, err, ErrNoKey, "an append needs the key")
	_, err = keyless.Verify(t.Context())
	require.ErrorIs(t, err, ErrNoKey, "so does a verification")
	_, _, err = keyless.Checkpoint(t.Context())
	require.ErrorIs(t, err, ErrNoKey)
	entries, _, err := keyless.List(t.Context(), Filter{})
	require.NoError(t, err, "reading does not")
	require.Len(t, entries, 1)
}

// TestForgedAppendDetected (SPEC CON K7, tamper-evident): a role that may
// insert into the table but
// does not hold the audit key (the applications') appends an entry with a
// hash it recomputed. The table refuses an unkeyed one; one that bypasses
// that trigger, or claims the console's key ID, or brings its own key,
// is reported by Verify.
func TestForgedAppendDetected(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		for range 3 {
			b.append(t, entryOpts{})
		}
		entries, _, err := b.trail.List(ctx, Filter{})
		require.NoError(t, err)
		head := entries[0]
		forge := func(keyID string, hash func(Entry) []byte) Entry {
			e := entry(entryOpts{Actor: "mallory", Reason: "forged"})
			e.Seq, e.At, e.KeyID, e.PrevHash = head.Seq+1, head.At.Add(time.Second), keyID, head.Hash
			e.Before, e.After = json.RawMessage(`{"status":"unavailable","version":3}`), nil
			e.Hash = hash(e)
			return e
		}
		sha := func(e Entry) []byte { return e.ComputeHash() }
		plainSHA := func(e Entry) []byte { // SHA-256 of the keyed encoding
			var h hasher
			s := sha256.Sum256(h.encode(keyedDomain, &e))
			return s[:]
		}

		// An unkeyed entry: the table refuses it.
		legacy := forge("", sha)
		require.ErrorContains(t, b.exec(t, insertSQL(b, legacy)), "an entry needs the key ID of its MAC")

		for _, tc := range []struct {
			name    string
			e       Entry
			problem string
		}{
			{"legacy link, trigger bypassed", legacy, "the entry has no key ID, but the chain is keyed from seq 1"},
			{"the console's key ID, SHA-256", forge(testKeys.CurrentID(), plainSHA), "is not the MAC of the entry's content"},
			{"the console's key ID, legacy hash", forge(testKeys.CurrentID(), sha), "is not the MAC of the entry's content"},
			{"a key of its own", forge(KeyID([]byte("mallory-key-0123456789abcdef-0000")), func(e Entry) []byte {
				h, err := mustKeyring([]byte("mallory-key-0123456789abcdef-0000")).ComputeHash(e)
				require.NoError(t, err)
				return h
			}), "which is not among the keys given"},
		} {
			b.tamper(t, insertSQL(b, tc.e))
			v, err := b.trail.Verify(ctx)
			require.NoError(t, err)
			require.False(t, v.OK, tc.name)
			require.Equal(t, int64(4), v.FirstBad, tc.name)
			require.Contains(t, v.Problem, tc.problem, tc.name)
			require.Equal(t, int64(3), v.Checked, tc.name)
			b.tamper(t, `DELETE FROM unstuck_audit_entry WHERE seq = 4`)
		}
		v, err := b.trail.Verify(ctx)
		require.NoError(t, err)
		require.True(t, v.OK, "the genuine chain still verifies: %s", v.Problem)
	})
}

// TestKeyRotation: entries MACed with the previous key keep verifying
// once the current key changes, new ones use the new key, and dropping the
// old key from the keyring reports its entries rather than passing them.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		oldKey := []byte("test-audit-key-0123456789abcdef!") // testKeys' current
		newKey := []byte("rotated-audit-key-0123456789abcdef")
		b.append(t, entryOpts{})
		b.append(t, entryOpts{})
		c, _, err := b.trail.Checkpoint(ctx)
		require.NoError(t, err)

		rotated := mustKeyring(newKey, oldKey)
		b.trail.keys = rotated
		e := b.append(t, entryOpts{})
		require.Equal(t, KeyID(newKey), e.KeyID, "new entries use the new key")
		v, err := b.trail.Verify(ctx, c.Anchor())
		require.NoError(t, err)
		require.True(t, v.OK, v.Problem)
		require.Equal(t, int64(3), v.Checked)
		require.NoError(t, rotated.CheckCheckpoint(c), "a checkpoint of the old key verifies too")
		c2, _, err := b.trail.Checkpoint(ctx)
		require.NoError(t, err, "the stored checkpoint of the old key is checked and passes")
		require.Equal(t, KeyID(newKey), c2.KeyID)

		b.trail.keys = mustKeyring(newKey)
		v, err = b.trail.Verify(ctx)
		require.NoError(t, err)
		require.False(t, v.OK)
		require.Equal(t, int64(1), v.FirstBad)
		require.Contains(t, v.Problem, KeyID(oldKey))
		require.Contains(t, v.Problem, "UNSTUCK_AUDIT_PREVIOUS_KEYS")
	})
}

// legacyBundle is a trail migrated to version 1 only (before the key),
// holding n legacy entries chained by SHA-256 as an older build wrote
// them, then migrated forward.
func legacyBundle(t *testing.T, dialect string, n int) testBundle {
	t.Helper()
	ctx := t.Context()
	v1 := fstest.MapFS{}
	sub, err := fs.Sub(migrations, "migration/"+dialect)
	require.NoError(t, err)
	for _, name := range []string{"001_audit.up.sql", "001_audit.down.sql"} {
		data, err := fs.ReadFile(sub, name)
		require.NoError(t, err)
		v1[name] = &fstest.MapFile{Data: data}
	}
	var b testBundle
	if dialect == DialectPostgres {
		pool := pgtest.Schema(t)
		require.NoError(t, migratepgx.Migrate(ctx, pool, migrationLine, v1))
		b = testBundle{trail: NewPostgres(pool, WithKeys(testKeys)), pool: pool}
	} else {
		db, err := openSQLite(filepath.Join(t.TempDir(), "audit.db"))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, db.Close()) })
		require.NoError(t, migratesqlite.Migrate(ctx, db, migrationLine, v1))
		b = testBundle{trail: NewSQLite(db, WithKeys(testKeys)), sqlDB: db}
	}
	prev := make([]byte, 32)
	start := time.Now().Add(-time.Hour).Truncate(time.Microsecond).UTC()
	for i := range n {
		e := entry(entryOpts{Actor: "legacy"})
		e.Before = json.RawMessage(`{"status":"unavailable","version":3}`)
		e.Seq, e.At, e.PrevHash = int64(i+1), start.Add(time.Duration(i)*time.Second), prev
		e.Hash = e.ComputeHash()
		prev = e.Hash
		require.NoError(t, b.exec(t, legacyInsertSQL(b, e)))
	}
	require.NoError(t, b.trail.Migrate(ctx))
	return b
}

// legacyInsertSQL is insertSQL without the key_id column, for a table of
// migration version 1.
func legacyInsertSQL(b testBundle, e Entry) string {
	s := insertSQL(b, e)
	s = strings.Replace(s, ", key_id)", ")", 1)
	return s[:strings.LastIndex(s, ", ")] + ")"
}

// TestLegacyEntriesMigrateForward: entries written before the chain was
// keyed keep verifying as SHA-256 links, Verify says where the keyed part
// starts, and the first keyed entry's MAC anchors the legacy part.
func TestLegacyEntriesMigrateForward(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{DialectPostgres, DialectSQLite} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			b := legacyBundle(t, dialect, 3)
			v, err := b.trail.Verify(ctx)
			require.NoError(t, err)
			require.True(t, v.OK, v.Problem)
			require.Equal(t, int64(3), v.Checked)
			require.Zero(t, v.KeyedFrom, "no keyed entry yet")

			e := b.append(t, entryOpts{})
			b.append(t, entryOpts{})
			require.Equal(t, int64(4), e.Seq)
			require.Equal(t, testKeys.CurrentID(), e.KeyID)
			v, err = b.trail.Verify(ctx)
			require.NoError(t, err)
			require.True(t, v.OK, v.Problem)
			require.Equal(t, int64(5), v.Checked)
			require.Equal(t, int64(4), v.KeyedFrom, "the keyed part starts after the legacy entries")

			// Rewriting a legacy entry and recomputing every legacy hash
			// after it breaks the link into the keyed part: the first keyed
			// entry's MAC covers the legacy head.
			b.rewrite(t, 2, 3, func(e Entry) []byte {
				if e.KeyID == "" {
					return e.ComputeHash()
				}
				return e.Hash // the keyed entries as they were: no key
			})
			v, err = b.trail.Verify(ctx)
			require.NoError(t, err)
			require.False(t, v.OK)
			require.Equal(t, int64(4), v.FirstBad)
			require.Contains(t, v.Problem, "forged without the key")
		})
	}
}
