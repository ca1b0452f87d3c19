package migratemysql

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSplitStatements: MySQL runs one statement per call; a migration is
// split at a ';' that ends a line, comment lines dropped, a trigger body
// on one line kept whole.
func TestSplitStatements(t *testing.T) {
	got := SplitStatements(`-- a comment; with a semicolon;
CREATE TABLE t (
    a INT, -- inline; comment kept
    b TEXT
);

CREATE TRIGGER x BEFORE INSERT ON t FOR EACH ROW
    BEGIN IF NEW.a = 0 THEN SET NEW.a = 1; END IF; END;
INSERT IGNORE INTO t (a) VALUES (1)`)
	require.Equal(t, []string{
		"CREATE TABLE t (\n    a INT, -- inline; comment kept\n    b TEXT\n)",
		"CREATE TRIGGER x BEFORE INSERT ON t FOR EACH ROW\n    BEGIN IF NEW.a = 0 THEN SET NEW.a = 1; END IF; END",
		"INSERT IGNORE INTO t (a) VALUES (1)",
	}, got)
}
