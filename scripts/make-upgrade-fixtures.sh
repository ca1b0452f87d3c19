#!/usr/bin/env bash
# make-upgrade-fixtures.sh remakes internal/consolecmd/testdata/upgrade/: a SQLite
# database file and a PostgreSQL plain-SQL dump made by the previous main
# (7f2d0fc, before the drivers owned their tables), which internal/consolecmd's TestUpgrade*
# restores, migrates with the current "console migrate" and checks.
#
# It checks out PREV (default 7f2d0fc) in a temporary worktree, copies
# internal/consolecmd/testdata/upgrade/makefixture_test.go into that checkout's
# cmd/console and runs it there with the old code: "console demo" serving the
# shop and the signups, the engine, reconciliation, operator decisions and
# sign-ins, all of the old code. The fixture's secret, audit key and the
# password of its user "ada" are constants in makefixture_test.go, which the
# upgrade test repeats.
#
#   scripts/make-upgrade-fixtures.sh            # PREV=7f2d0fc
#   PG=postgres://postgres@127.0.0.1:5432/postgres scripts/make-upgrade-fixtures.sh
#
# Needs go, and PostgreSQL at $PG (a maintenance database: the script creates
# and drops a database of its own there) with pg_dump on the PATH.
set -euo pipefail

PREV=${PREV:-7f2d0fc}
PG=${PG:-postgres://postgres@127.0.0.1:5432/postgres}
root=$(git rev-parse --show-toplevel)
out=$root/internal/consolecmd/testdata/upgrade
work=$(mktemp -d)
old=$work/prev
dbname=unstuck_upgrade_fixture_$$
pgdb=${PG%/*}/$dbname

cleanup() {
	psql -q "$PG" -c "DROP DATABASE IF EXISTS $dbname WITH (FORCE)" >/dev/null 2>&1 || true
	git -C "$root" worktree remove --force "$old" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

git -C "$root" worktree add --detach "$old" "$PREV" >/dev/null
cp "$out/makefixture_test.go" "$old/cmd/console/zz_makefixture_test.go"

# SQLite: the demo's file, copied with VACUUM INTO while a record is held
# processing (the copy is one file, no WAL).
rm -f "$out/previous-main.sqlite"
(cd "$old" && UNSTUCK_FIXTURE_DB="sqlite:$work/fixture.db" UNSTUCK_FIXTURE_OUT="$out/previous-main.sqlite" \
	go test -count=1 -run '^TestMakeUpgradeFixture$' ./cmd/console/)

# PostgreSQL: a new database, then a plain-SQL dump of it. --inserts, so
# that the test can run the dump through pgx (no COPY … FROM stdin).
psql -q "$PG" -c "CREATE DATABASE $dbname"
(cd "$old" && UNSTUCK_FIXTURE_DB="$pgdb" \
	go test -count=1 -run '^TestMakeUpgradeFixture$' ./cmd/console/)
pg_dump --no-owner --no-privileges --inserts "$pgdb" >"$out/previous-main.pg.sql"

echo "PREV=$PREV ($(git -C "$old" rev-parse HEAD)); $(pg_dump --version)" >"$out/MADE_BY"
ls -l "$out"
