package idemsqlite

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemtest"
	"github.com/unstuckhq/unstuck/idem/internal/leanpath"
	"github.com/unstuckhq/unstuck/idem/internal/sqlstore"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

// openLean returns a migrated store on a new file opened with Open, its
// lean Reserves forced to way, and the handle, closed at cleanup.
func openLean(t *testing.T, way leanpath.Way) (*Store, *sql.DB) {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "unstuck.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	s := New(db)
	s.path.Force = way
	require.NoError(t, s.Migrate(t.Context()))
	return s, db
}

// leanSetup returns a migrated store on db and a completed record's ident.
func leanSetup(t *testing.T, db *sql.DB) (*Store, idemdriver.Ident) {
	t.Helper()
	s := New(db)
	require.NoError(t, s.Migrate(t.Context()))
	return s, completed(t, s)
}

// completed reserves and completes a record on s and returns its ident.
func completed(t *testing.T, s *Store) idemdriver.Ident {
	t.Helper()
	id := idemdriver.Ident{Scope: "acme", Operation: "charge", KeyDigest: idem.Digest("acme", "charge", "k")}
	rec, created, err := s.Reserve(t.Context(), idemdriver.ReserveParams{Ident: id, Fingerprint: "fp", Owner: "o", Lease: time.Minute, TTL: time.Hour, Lean: true})
	require.NoError(t, err)
	require.True(t, created)
	require.NoError(t, s.Complete(t.Context(), id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("r")}))
	return id
}

// leanRepeat reserves id again, lean, and checks that it finds the
// completed record.
func leanRepeat(t *testing.T, s *Store, id idemdriver.Ident) {
	t.Helper()
	rec, created, err := s.Reserve(t.Context(), idemdriver.ReserveParams{Ident: id, Owner: "p", Lease: time.Minute, TTL: time.Hour, Lean: true})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, idemdriver.StatusCompleted, rec.Status)
	require.Equal(t, []byte("r"), rec.Result)
}

func TestLeanReadOnOpenConnections(t *testing.T) {
	t.Parallel()
	s, db := openLean(t, leanpath.Adaptive)
	leanRepeat(t, s, completed(t, s))
	require.False(t, s.notLean.Load(), "a handle from Open reads through its connections")

	// Of all the pool's connections, the one that ran the read has the
	// statement prepared.
	conns := make([]*sql.Conn, db.Stats().MaxOpenConnections)
	prepared := 0
	for i := range conns {
		var err error
		conns[i], err = db.Conn(t.Context())
		require.NoError(t, err)
		require.NoError(t, conns[i].Raw(func(dc any) error {
			lc, ok := dc.(*leanConn)
			require.True(t, ok, "Open's connections are leanConns, got %T", dc)
			if lc.lean != nil {
				prepared++
			}
			return nil
		}))
	}
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
	require.Equal(t, 1, prepared, "connections with the lean read prepared")
}

func TestLeanReadOnAnotherHandle(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "unstuck.db")
	q := url.Values{"_pragma": {"busy_timeout(10000)", "journal_mode(WAL)"}}
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}).String())
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	s, id := leanSetup(t, db)
	leanRepeat(t, s, id)
	require.True(t, s.notLean.Load(), "a handle not from Open reads through database/sql")
	leanRepeat(t, s, id)
}

// TestLeanConnCloseFinalizes checks that closing a handle from Open closes
// every file it opened: SQLite keeps a connection closed under an
// unfinalized statement open, its file descriptors included.
func TestLeanConnCloseFinalizes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unstuck.db")
	openFiles := func() int {
		t.Helper()
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("no /proc/self/fd: %v", err)
		}
		n := 0
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, path) {
				n++
			}
		}
		return n
	}
	db, err := Open(path)
	require.NoError(t, err)
	s, id := leanSetup(t, db)
	// Hold every connection, so that each one runs the read.
	conns := make([]*sql.Conn, db.Stats().MaxOpenConnections)
	for i := range conns {
		conns[i], err = db.Conn(t.Context())
		require.NoError(t, err)
		require.NoError(t, conns[i].Raw(func(dc any) error {
			_, _, err := dc.(*leanConn).readLean(t.Context(), idemdriver.ReserveParams{Ident: id}, time.Now())
			return err
		}))
	}
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
	leanRepeat(t, s, id)
	require.Positive(t, openFiles(), "the open handle holds its files")
	require.NoError(t, db.Close())
	require.Zero(t, openFiles(), "files of %s still open after Close", path)
}

func TestDecodeLeanRefusesRowsOfAnotherShape(t *testing.T) {
	t.Parallel()
	good := [leanColumnCount]driver.Value{int64(7), "fp", "completed", []byte("r"), "tok", int64(3), nil, int64(10), int64(20)}
	p := idemdriver.ReserveParams{Ident: idemdriver.Ident{Scope: "s", Operation: "o", KeyDigest: "d"}}
	at := time.UnixMicro(5).UTC()
	rec, err := decodeLean(&good, p, at)
	require.NoError(t, err)
	require.Equal(t, idemdriver.Record{ID: 7, Ident: p.Ident, Fingerprint: "fp", Status: idemdriver.StatusCompleted, Result: []byte("r"),
		Owner: idemdriver.Owner{Token: "tok", Fence: 3}, CreatedAt: sqlstore.Micros(10), ExpiresAt: sqlstore.Micros(20), ReadAt: at}, rec)

	empty := good
	empty[3] = []byte(nil) // an empty blob
	rec, err = decodeLean(&empty, p, at)
	require.NoError(t, err)
	require.Equal(t, []byte{}, rec.Result, "a stored empty result stays non-nil")

	for i, v := range []driver.Value{"7", int64(1), []byte("completed"), "r", int64(1), "3", "x", nil, 1.5} {
		bad := good
		bad[i] = v
		_, err := decodeLean(&bad, p, at)
		require.ErrorContains(t, err, leanColumnNames[i], "column %d holding %T", i, v)
	}
	unknown := good
	unknown[2] = "done"
	_, err = decodeLean(&unknown, p, at)
	require.ErrorContains(t, err, `unknown status "done"`)
}

// SPEC IDEM-S3: the whole conformance suite, which runs the
// engine's lean Reserve (the same-key race, fenced takeover, lean
// reserve), passes with either way forced; TestConformance runs the
// adaptive choice.
func TestConformanceLeanWays(t *testing.T) {
	slowtest.Skip(t, slowtest.Ways)
	t.Parallel()
	for _, way := range []leanpath.Way{leanpath.WriteFirst, leanpath.ReadFirst} {
		t.Run(fmt.Sprint("way=", way), func(t *testing.T) {
			t.Parallel()
			idemtest.Run(t, func(t *testing.T) idemdriver.Store {
				s, _ := openLean(t, way)
				return s
			})
		})
	}
}

// A lean Reserve of a key that has a record writes nothing,
// whichever way it takes: the insert that meets the record takes no fence
// from the counter and changes no row.
func TestLeanReserveOfExistingWritesNothing(t *testing.T) {
	t.Parallel()
	for _, way := range []leanpath.Way{leanpath.WriteFirst, leanpath.ReadFirst} {
		s, db := openLean(t, way)
		id := completed(t, s)
		var counter, after int64
		fence := `SELECT value FROM unstuck_idem_fence WHERE id = 1`
		require.NoError(t, db.QueryRowContext(t.Context(), fence).Scan(&counter))
		before, _, err := s.Get(t.Context(), id)
		require.NoError(t, err)
		leanRepeat(t, s, id)
		got, _, err := s.Get(t.Context(), id)
		require.NoError(t, err)
		got.ReadAt = before.ReadAt
		require.Equal(t, before, got, "way %d: the record is unchanged", way)
		require.NoError(t, db.QueryRowContext(t.Context(), fence).Scan(&after))
		require.Equal(t, counter, after, "way %d: no fence taken", way)
	}
}

// A Store writes first while its keys are new and reads first
// once repeats are more than half of its lean Reserves.
func TestLeanPathOfAStore(t *testing.T) {
	t.Parallel()
	s, _ := openLean(t, leanpath.Adaptive)
	id := completed(t, s)
	require.False(t, s.path.ReadFirst(), "a Store whose keys are new writes first")
	for range 31 {
		leanRepeat(t, s, id)
	}
	require.False(t, s.path.ReadFirst(), "31 repeats in a row are not yet enough")
	leanRepeat(t, s, id)
	require.True(t, s.path.ReadFirst(), "32 repeats in a row read first")
}
