package ops_test

import (
	"fmt"
	"testing"

	"github.com/unstuckhq/unstuck/internal/audit"
)

// failAppend is a marker that a decision's reason carries to make the
// database refuse its audit entry (see breakAudit).
const failAppend = " [the audit INSERT must fail]"

// breakAudit installs on the test's own database (its schema on
// PostgreSQL, its file on SQLite) a trigger that makes the INSERT of an
// audit entry whose reason carries failAppend raise. Everything before it
// in the decision's transaction succeeds, so only a decision whose
// transition and entry share one transaction leaves the item unchanged.
func breakAudit(t testing.TB, dialect string, exec func(t testing.TB, query string)) {
	t.Helper()
	if dialect == audit.DialectPostgres {
		exec(t, `CREATE FUNCTION test_refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the test refuses this audit entry'; END $$`)
		exec(t, `CREATE TRIGGER test_refuse_audit BEFORE INSERT ON unstuck_audit_entry FOR EACH ROW
WHEN (NEW.reason LIKE '%[the audit INSERT must fail]%') EXECUTE FUNCTION test_refuse_audit()`)
		return
	}
	if dialect == audit.DialectMySQL {
		exec(t, `CREATE TRIGGER test_refuse_audit BEFORE INSERT ON unstuck_audit_entry FOR EACH ROW
BEGIN IF NEW.reason LIKE '%[the audit INSERT must fail]%' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'the test refuses this audit entry'; END IF; END`)
		return
	}
	exec(t, `CREATE TRIGGER test_refuse_audit BEFORE INSERT ON unstuck_audit_entry
WHEN NEW.reason LIKE '%[the audit INSERT must fail]%'
BEGIN SELECT RAISE(ABORT, 'the test refuses this audit entry'); END`)
}

// failCommits makes, until the returned restore is called, the COMMIT of
// every transaction fail that wrote to a table of the test's own database
// other than the audit trail's: a deferred constraint trigger on each on
// PostgreSQL, a deferred foreign key that a trigger on each violates on
// SQLite. The tables are found in the catalog, not named: they are the
// engines' (and River's), which their drivers own. A decision's
// transaction then does all its work and its audit entry, and fails at the
// end: an entry appended in a transaction of its own would stay behind.
// MySQL checks every constraint at once, so no COMMIT can be made to fail
// there: the test is skipped on MySQL.
func failCommits(t testing.TB, dialect string, exec func(t testing.TB, query string), names func(t testing.TB, query string) []string) (restore func()) {
	t.Helper()
	if dialect == audit.DialectMySQL {
		t.Skip("InnoDB checks every constraint at once: no COMMIT can be made to fail")
	}
	if dialect == audit.DialectPostgres {
		tables := names(t, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'unstuck_audit_entry'`)
		exec(t, `CREATE OR REPLACE FUNCTION test_fail_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the test fails this commit'; END $$`)
		for _, tb := range tables {
			exec(t, fmt.Sprintf(`CREATE CONSTRAINT TRIGGER test_fail_commit AFTER INSERT OR UPDATE OR DELETE ON %q
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_fail_commit()`, tb))
		}
		return func() {
			for _, tb := range tables {
				exec(t, fmt.Sprintf(`DROP TRIGGER test_fail_commit ON %q`, tb))
			}
		}
	}
	tables := names(t, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'unstuck_audit_entry' AND name NOT LIKE 'test_%'`)
	exec(t, `CREATE TABLE IF NOT EXISTS test_parent (id INTEGER PRIMARY KEY)`)
	exec(t, `CREATE TABLE IF NOT EXISTS test_child (parent INTEGER REFERENCES test_parent (id) DEFERRABLE INITIALLY DEFERRED)`)
	var triggers []string
	for i, tb := range tables {
		for _, op := range []string{"INSERT", "UPDATE", "DELETE"} {
			name := fmt.Sprintf("test_fail_commit_%d_%s", i, op)
			exec(t, fmt.Sprintf(`CREATE TRIGGER %s AFTER %s ON %q BEGIN INSERT INTO test_child (parent) VALUES (1); END`, name, op, tb))
			triggers = append(triggers, name)
		}
	}
	return func() {
		for _, name := range triggers {
			exec(t, `DROP TRIGGER `+name)
		}
	}
}
