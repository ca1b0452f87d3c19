package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCheckpointText(t *testing.T) {
	t.Parallel()
	c := testKeys.SignCheckpoint(Anchor{Seq: 12, Hash: make([]byte, 32)}, time.Date(2026, 12, 1, 1, 2, 3, 456789123, time.UTC))
	require.Equal(t, testKeys.CurrentID(), c.KeyID)
	require.Equal(t, time.Date(2026, 12, 1, 1, 2, 3, 456789000, time.UTC), c.At, "to the microsecond")
	read, err := ParseCheckpoint(c.String())
	require.NoError(t, err)
	require.Equal(t, c, read, "the printed line reads back exactly")
	require.NoError(t, testKeys.CheckCheckpoint(read))

	// Each field is under the MAC.
	for name, change := range map[string]func(*Checkpoint){
		"seq":  func(c *Checkpoint) { c.Seq++ },
		"hash": func(c *Checkpoint) { c.Hash = append([]byte{1}, c.Hash[1:]...) },
		"at":   func(c *Checkpoint) { c.At = c.At.Add(time.Microsecond) },
		"mac":  func(c *Checkpoint) { c.MAC = append([]byte{c.MAC[0] ^ 1}, c.MAC[1:]...) },
	} {
		forged := read
		change(&forged)
		require.ErrorIs(t, testKeys.CheckCheckpoint(forged), ErrBadCheckpoint, name)
	}
	// Made with another key: unknown here; a forger's own key with our
	// key's ID does not verify.
	other := mustKeyring([]byte("another-audit-key-0123456789abcdef"))
	require.ErrorIs(t, testKeys.CheckCheckpoint(other.SignCheckpoint(c.Anchor(), c.At)), ErrUnknownKey)
	stolenID := other.SignCheckpoint(c.Anchor(), c.At)
	stolenID.KeyID = testKeys.CurrentID()
	require.ErrorIs(t, testKeys.CheckCheckpoint(stolenID), ErrBadCheckpoint)

	for _, bad := range []string{"", "nonsense 1 2 3 4 5", strings.Replace(c.String(), "/v2", "/v1", 1),
		strings.Replace(c.String(), " 12 ", " 0 ", 1), strings.Replace(c.String(), "2026-12-01T", "yesterday", 1),
		c.String()[:len(c.String())-2], c.String() + " extra"} {
		_, err := ParseCheckpoint(bad)
		require.ErrorIs(t, err, ErrInvalid, bad)
	}
	for _, bad := range []string{"", "1", "x:00", "1:zz", "-1:" + Anchor{Hash: c.Hash}.String()[2:]} {
		_, err := ParseAnchor(bad)
		require.ErrorIs(t, err, ErrInvalid, bad)
	}
}

// TestCheckpointCatchesRewrittenTail (SPEC CON K7): a tail cut or rewritten with
// recomputed (even correctly MACed) hashes verifies on its own, but not
// against a checkpoint kept outside the database, even when the stored
// checkpoints were rewritten too.
func TestCheckpointCatchesRewrittenTail(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		_, _, err := b.trail.Checkpoint(ctx)
		require.ErrorIs(t, err, ErrEmpty, "nothing to checkpoint")
		_, ok, err := b.trail.LastCheckpoint(ctx)
		require.NoError(t, err)
		require.False(t, ok)

		for range 5 {
			b.append(t, entryOpts{})
		}
		c, v, err := b.trail.Checkpoint(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(5), c.Seq)
		require.Equal(t, v.Head, c.Hash)
		last, ok, err := b.trail.LastCheckpoint(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, c, last, "stored as printed")
		printed := c.String() // kept outside the database

		// Rewrite seq 4 and 5 with the key (an insider with the key and
		// the table), and the stored checkpoints with them.
		b.rewrite(t, 4, 5, func(e Entry) []byte { return mustHash(t, e) }, `DELETE FROM unstuck_audit_checkpoint`)
		v, err = b.trail.Verify(ctx)
		require.NoError(t, err)
		require.True(t, v.OK, "the rewritten chain is consistent on its own")

		kept, err := ParseCheckpoint(printed)
		require.NoError(t, err)
		require.NoError(t, testKeys.CheckCheckpoint(kept))
		v, err = b.trail.Verify(ctx, kept.Anchor())
		require.NoError(t, err)
		require.False(t, v.OK)
		require.Equal(t, int64(5), v.FirstBad)
		require.Contains(t, v.Problem, "differs from the anchor")

		// A cut tail: the checkpoint names a seq beyond the end.
		b.tamper(t, `DELETE FROM unstuck_audit_entry WHERE seq >= 4`)
		v, err = b.trail.Verify(ctx, kept.Anchor())
		require.NoError(t, err)
		require.False(t, v.OK)
		require.Equal(t, int64(4), v.FirstBad)
		require.Contains(t, v.Problem, "removed from the end")
	})
}

// TestCheckpointRefusesBrokenChain: a checkpoint is only made of a head
// that verifies, against the last stored checkpoint too.
func TestCheckpointRefusesBrokenChain(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		for range 3 {
			b.append(t, entryOpts{})
		}
		_, _, err := b.trail.Checkpoint(ctx)
		require.NoError(t, err)

		b.tamper(t, `DELETE FROM unstuck_audit_entry WHERE seq = 3`)
		_, v, err := b.trail.Checkpoint(ctx)
		require.ErrorIs(t, err, ErrBroken, "the cut tail is caught by the stored checkpoint")
		require.Equal(t, int64(3), v.FirstBad)

		b.tamper(t, `UPDATE unstuck_audit_checkpoint SET seq = 2`)
		_, _, err = b.trail.Checkpoint(ctx)
		require.ErrorIs(t, err, ErrBadCheckpoint, "a stored checkpoint rewritten without the key")
	})
}
