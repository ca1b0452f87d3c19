package audit

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// downgrade rewrites the whole chain as legacy SHA-256 links, with the
// actor of seq 1 changed, as the table's owner could without the audit
// key; more runs first.
func (b testBundle) downgrade(t *testing.T, more ...string) {
	t.Helper()
	entries, _, err := b.trail.List(t.Context(), Filter{Limit: MaxLimit})
	require.NoError(t, err)
	stmts := append(more, `DELETE FROM unstuck_audit_entry`)
	prev := make([]byte, 32)
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if e.Seq == 1 {
			e.Actor = "forged-nobody"
		}
		e.KeyID, e.PrevHash = "", prev
		e.Hash = e.ComputeHash()
		prev = e.Hash
		stmts = append(stmts, insertSQL(b, e))
	}
	b.tamper(t, stmts...)
}

// SPEC K24: a trail keyed from its start never verifies as legacy. The
// table's owner rewrites every entry as a legacy link with chosen content:
// the keying marker refuses it; deleting the marker, or editing it without
// the key, is refused too; replacing it with an unsealed one is caught by
// the last checkpoint, which records when keying began under its MAC.
func TestNoDowngrade(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		for range 5 {
			b.append(t, entryOpts{})
		}
		cp, _, err := b.trail.Checkpoint(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, cp.KeyedFrom, "a checkpoint records when keying began")

		b.downgrade(t)
		v, err := b.trail.Verify(ctx)
		require.NoError(t, err)
		require.False(t, v.OK, "rewritten as legacy links: %+v", v)
		require.EqualValues(t, 1, v.FirstBad)
		require.Contains(t, v.Problem, "the keying marker says every entry from seq 1 is keyed")

		b.tamper(t, `UPDATE unstuck_audit_keying SET keyed_from = 6`)
		v, err = b.trail.Verify(ctx)
		require.NoError(t, err)
		require.False(t, v.OK)
		require.Contains(t, v.Problem, "the keying marker's MAC does not verify")

		b.tamper(t, `DELETE FROM unstuck_audit_keying`)
		v, err = b.trail.Verify(ctx)
		require.NoError(t, err)
		require.False(t, v.OK)
		require.Contains(t, v.Problem, "the keying marker is missing")

		// An unsealed marker claiming the trail was never keyed: the
		// chain alone agrees, but it is not keyed (verify refuses that
		// without --allow-legacy), the stored checkpoint contradicts it,
		// and it is not sealed over that checkpoint.
		b.tamper(t, `INSERT INTO unstuck_audit_keying (id, keyed_from) VALUES (1, 6)`)
		v, err = b.trail.Verify(ctx)
		require.NoError(t, err)
		require.True(t, v.OK, "%+v", v)
		require.Zero(t, v.KeyedFrom, "no entry keyed")
		sealed, err := b.trail.SealKeying(ctx)
		require.NoError(t, err)
		require.False(t, sealed, "the stored checkpoint says keyed from seq 1")
		v, err = b.trail.Verify(ctx, cp.Anchor())
		require.NoError(t, err)
		require.False(t, v.OK)
		require.Contains(t, v.Problem, "the keying marker says keyed from seq 6, the checkpoint of seq 5 says 1")
	})
}

// SPEC K24: a trail emptied (MySQL TRUNCATE; DELETE elsewhere) or cut at
// its tail is caught by the last checkpoint.
func TestEmptiedTrailCaughtByCheckpoint(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		for range 4 {
			b.append(t, entryOpts{})
		}
		cp, _, err := b.trail.Checkpoint(ctx)
		require.NoError(t, err)
		empty := `DELETE FROM unstuck_audit_entry`
		if b.trail.Dialect() == DialectMySQL {
			empty = `TRUNCATE TABLE unstuck_audit_entry`
		}
		b.tamper(t, empty)
		v, err := b.trail.Verify(ctx, cp.Anchor())
		require.NoError(t, err)
		require.False(t, v.OK)
		require.Equal(t, fmt.Sprintf("seq 1 is missing: the trail ends at seq 0 but an anchor records seq %d: entries were removed from the end", cp.Seq), v.Problem)
	})
}

// An upgraded trail's marker sits where its keyed part begins: entries
// before it are legacy, every one from it on keyed, and a trail cut below
// it is caught by the marker alone.
func TestKeyingMarkerOfAnUpgradedTrail(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		for range 4 {
			b.append(t, entryOpts{})
		}
		// As a trail written before the key would be: seq 1 to 4 legacy,
		// the marker (unsealed, as the migration wrote it) at seq 5.
		b.downgrade(t, `DELETE FROM unstuck_audit_keying`, `INSERT INTO unstuck_audit_keying (id, keyed_from) VALUES (1, 5)`, `DELETE FROM unstuck_audit_checkpoint`)
		sealed, err := b.trail.SealKeying(ctx)
		require.NoError(t, err)
		require.True(t, sealed, "consistent with the chain: sealed")
		b.append(t, entryOpts{})
		v, err := b.trail.Verify(ctx)
		require.NoError(t, err)
		require.True(t, v.OK, "%+v", v)
		require.EqualValues(t, 5, v.KeyedFrom)
		require.EqualValues(t, 5, v.Keying.KeyedFrom)

		b.tamper(t, `DELETE FROM unstuck_audit_entry WHERE seq >= 4`)
		v, err = b.trail.Verify(ctx)
		require.NoError(t, err)
		require.False(t, v.OK)
		require.Contains(t, v.Problem, "the trail ends at seq 3 but the keying marker records that seq 4 existed when keying began")
	})
}
