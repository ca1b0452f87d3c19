package ops_test

import (
	"testing"

	"github.com/unstuckhq/unstuck/internal/audit"
)

// Markers that a decision's reason carries to make the database break its
// audit entry (see breakAudit).
const (
	failAppend = " [the audit INSERT must fail]"
	failCommit = " [the COMMIT must fail]"
)

// breakAudit installs on the test's own database (its schema on
// PostgreSQL, its file on SQLite) triggers that break a decision's
// transaction where the audit entry is written, for entries whose reason
// carries a marker: with failAppend the INSERT of the entry raises; with
// failCommit the INSERT succeeds and the COMMIT fails (a deferred
// constraint trigger on PostgreSQL, a deferred foreign key on SQLite).
// Everything else in the transaction succeeds, so only a decision whose
// transition and entry share one transaction leaves the item unchanged.
func breakAudit(t testing.TB, dialect string, exec func(t testing.TB, query string)) {
	t.Helper()
	if dialect == audit.DialectPostgres {
		exec(t, `CREATE FUNCTION test_refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the test refuses this audit entry'; END $$`)
		exec(t, `CREATE TRIGGER test_refuse_audit BEFORE INSERT ON unstuck_audit_entry FOR EACH ROW
WHEN (NEW.reason LIKE '%[the audit INSERT must fail]%') EXECUTE FUNCTION test_refuse_audit()`)
		exec(t, `CREATE FUNCTION test_fail_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the test fails this commit'; END $$`)
		exec(t, `CREATE CONSTRAINT TRIGGER test_fail_commit AFTER INSERT ON unstuck_audit_entry
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
WHEN (NEW.reason LIKE '%[the COMMIT must fail]%') EXECUTE FUNCTION test_fail_commit()`)
		return
	}
	exec(t, `CREATE TRIGGER test_refuse_audit BEFORE INSERT ON unstuck_audit_entry
WHEN NEW.reason LIKE '%[the audit INSERT must fail]%'
BEGIN SELECT RAISE(ABORT, 'the test refuses this audit entry'); END`)
	exec(t, `CREATE TABLE test_parent (id INTEGER PRIMARY KEY)`)
	exec(t, `CREATE TABLE test_child (parent INTEGER REFERENCES test_parent (id) DEFERRABLE INITIALLY DEFERRED)`)
	exec(t, `CREATE TRIGGER test_fail_commit AFTER INSERT ON unstuck_audit_entry
WHEN NEW.reason LIKE '%[the COMMIT must fail]%'
BEGIN INSERT INTO test_child (parent) VALUES (1); END`)
}
