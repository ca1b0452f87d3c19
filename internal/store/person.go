package store

// Persons: the human behind one or more console accounts. Four-eyes
// approval (SPEC K13) asks for a second person, not a second account: a
// local account and its owner's single sign-on account are one approver.
//
// Two accounts are one person when
//
//   - an admin linked them ([DB.LinkUsers], the "same person as" form on
//     /users), or
//   - both carry the same verified email, compared without case: for an
//     oidc account the provider's email_verified claim was true at its
//     last sign-in (User.EmailVerified). An unverified email links
//     nothing. A local account has no email the console vouches for (no
//     command or page sets one), so a local account is one person with
//     another account only when an admin links them.
//
// The relation is transitive: an account linked to an account that shares
// a verified email with a third is one person with the third too.
//
// The links are kept in unstuck_console_user.person_id (migration 009):
// NULL for an account linked with no other, else the smallest id of the
// accounts of its link group, so that a group has two accounts at least
// and is named by one of them. Every link and unlink rewrites the groups
// it touches in one transaction, serialized with every other (PostgreSQL
// and MySQL: every account row locked in id order; SQLite: BEGIN
// IMMEDIATE); none moves updated_at, which clears a local account's
// sign-in throttle.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/unstuckhq/unstuck/migrate/migratemysql"
	"github.com/unstuckhq/unstuck/migrate/migratesqlite"
)

// FieldSameAs names the account a link names ("same person as …") in a
// *[fielderr.Error] of [DB.LinkUsers].
const FieldSameAs = "same_as"

// PersonAccount is another account of a person, as [People.Others]
// reports it: Linked when an admin linked it with the account asked
// about (directly, in one link group), SameEmail when both carry the same
// verified email. Neither: it is one person through other accounts.
type PersonAccount struct {
	Username  string
	Linked    bool
	SameEmail bool
}

// People says which accounts are one person, as read by [DB.People] at
// one moment. The zero value knows no link: every account is its own
// person.
type People struct {
	person  map[string]int    // username → index of its person
	members [][]string        // per person, its usernames, sorted
	group   map[string]int64  // username → link group (person_id); absent when none
	email   map[string]string // username → verified email, folded; absent when none
}

// personRow is what People is computed from: one account.
type personRow struct {
	username string
	email    string
	verified bool
	group    int64 // person_id; 0: none
}

// foldEmail is the form in which two emails are compared.
func foldEmail(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// newPeople groups rows into persons (a union-find over usernames, joined
// by link group and by verified email).
func newPeople(rows []personRow) People {
	p := People{person: map[string]int{}, group: map[string]int64{}, email: map[string]string{}}
	parent := make([]int, len(rows))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(i, j int) {
		if ri, rj := find(i), find(j); ri != rj {
			parent[rj] = ri
		}
	}
	byGroup, byEmail := map[int64]int{}, map[string]int{}
	for i, r := range rows {
		if r.group != 0 {
			p.group[r.username] = r.group
			if j, ok := byGroup[r.group]; ok {
				union(j, i)
			} else {
				byGroup[r.group] = i
			}
		}
		if e := foldEmail(r.email); r.verified && e != "" {
			p.email[r.username] = e
			if j, ok := byEmail[e]; ok {
				union(j, i)
			} else {
				byEmail[e] = i
			}
		}
	}
	index := map[int]int{}
	for i, r := range rows {
		root := find(i)
		k, ok := index[root]
		if !ok {
			k = len(p.members)
			index[root] = k
			p.members = append(p.members, nil)
		}
		p.person[r.username] = k
		p.members[k] = append(p.members[k], r.username)
	}
	for _, m := range p.members {
		slices.Sort(m)
	}
	return p
}

// Same reports whether the accounts named a and b are one person: the same
// username, linked by an admin, or with the same verified email, directly
// or through other accounts. An unknown username is its own person.
func (p People) Same(a, b string) bool {
	if a == b {
		return true
	}
	i, ok := p.person[a]
	j, ok2 := p.person[b]
	return ok && ok2 && i == j
}

// Others returns the other accounts of username's person, by username;
// none when it is a person of one account (or unknown).
func (p People) Others(username string) []PersonAccount {
	k, ok := p.person[username]
	if !ok {
		return nil
	}
	var out []PersonAccount
	for _, other := range p.members[k] {
		if other == username {
			continue
		}
		a := PersonAccount{Username: other}
		if g, ok := p.group[username]; ok && p.group[other] == g {
			a.Linked = true
		}
		if e, ok := p.email[username]; ok && p.email[other] == e {
			a.SameEmail = true
		}
		out = append(out, a)
	}
	return out
}

// Linked reports whether an admin linked username with another account
// (so that [DB.UnlinkUser] has something to undo).
func (p People) Linked(username string) bool {
	_, ok := p.group[username]
	return ok
}

// People reads which accounts are one person (see [People]). It reads
// every account: a console has tens or hundreds, not millions.
func (d *DB) People(ctx context.Context) (People, error) {
	const q = `SELECT username, email, email_verified, coalesce(person_id, 0) FROM unstuck_console_user`
	var rows []personRow
	scan := func(s func(...any) error) error {
		var (
			r        personRow
			verified nullFlag
		)
		if err := s(&r.username, &r.email, &verified, &r.group); err != nil {
			return err
		}
		r.verified = verified.b
		rows = append(rows, r)
		return nil
	}
	var err error
	if d.dialect == DialectPostgres {
		var rs pgx.Rows
		if rs, err = d.pool.Query(ctx, q); err == nil {
			for rs.Next() && err == nil {
				err = scan(rs.Scan)
			}
			rs.Close()
			err = cmp.Or(err, rs.Err())
		}
		err = pgMapError(err)
	} else {
		var rs *sql.Rows
		if rs, err = d.sqlite.QueryContext(ctx, q); err == nil {
			for rs.Next() && err == nil {
				err = scan(rs.Scan)
			}
			err = cmp.Or(err, rs.Err(), rs.Close())
		}
	}
	if err != nil {
		return People{}, fmt.Errorf("store: read persons: %w", err)
	}
	return newPeople(rows), nil
}

// SamePerson reports whether the accounts named a and b belong to one
// person (see [People]): the same username, linked by an admin, or with
// the same verified email, directly or through other accounts. It
// satisfies ops.Persons, so that a request's requester cannot approve or
// reject it with another of their accounts.
func (d *DB) SamePerson(ctx context.Context, a, b string) (bool, error) {
	if a == b {
		return true, nil
	}
	p, err := d.People(ctx)
	if err != nil {
		return false, err
	}
	return p.Same(a, b), nil
}

// LinkChange is what a link or an unlink did to an account: the other
// accounts an admin had linked it with before, and after; usernames,
// sorted.
type LinkChange struct {
	Before, After []string
}

// LinkUsers records that the accounts named username and sameAs are one
// person: their link groups become one. Linking accounts linked already
// changes nothing. It returns an error matching [ErrNotFound] when there is
// no user named username, and a *[fielderr.Error] for [FieldSameAs] when
// sameAs names no user or names username itself.
func (d *DB) LinkUsers(ctx context.Context, username, sameAs string) (LinkChange, error) {
	if err := ValidateUsername(username); err != nil {
		return LinkChange{}, fmt.Errorf("store: link user %q: %w", username, ErrNotFound)
	}
	switch {
	case sameAs == "":
		return LinkChange{}, invalid(FieldSameAs, "name the other account of the same person")
	case sameAs == username:
		return LinkChange{}, invalid(FieldSameAs, "an account cannot be linked to itself: name another account")
	case ValidateUsername(sameAs) != nil:
		return LinkChange{}, invalid(FieldSameAs, fmt.Sprintf("there is no user named %q", sameAs))
	}
	ch, err := d.relink(ctx, func(rows []linkRow) (LinkChange, map[int64]int64, error) {
		return planLink(rows, username, sameAs)
	})
	if err != nil {
		var fe *fielderr.Error
		if errors.As(err, &fe) {
			return LinkChange{}, fe
		}
		return LinkChange{}, fmt.Errorf("store: link user %q with %q: %w", username, sameAs, err)
	}
	return ch, nil
}

// UnlinkUser takes the account named username out of its link group: it
// is no longer one person with the accounts an admin linked it with (it
// still is with those that share its verified email). The others stay
// linked with each other; one left alone is linked with none. Unlinking an
// account linked with none changes nothing. It returns an error matching
// [ErrNotFound] when there is no such user.
func (d *DB) UnlinkUser(ctx context.Context, username string) (LinkChange, error) {
	if err := ValidateUsername(username); err != nil {
		return LinkChange{}, fmt.Errorf("store: unlink user %q: %w", username, ErrNotFound)
	}
	ch, err := d.relink(ctx, func(rows []linkRow) (LinkChange, map[int64]int64, error) {
		return planUnlink(rows, username)
	})
	if err != nil {
		return LinkChange{}, fmt.Errorf("store: unlink user %q: %w", username, err)
	}
	return ch, nil
}

// linkRow is one account's link: its person_id, 0 for none.
type linkRow struct {
	id       int64
	username string
	group    int64
}

// linkPlan computes, from every account's link, what changes and the
// person_id to write per account id (0: NULL).
type linkPlan func(rows []linkRow) (LinkChange, map[int64]int64, error)

// partners returns the usernames linked with rows[i] in rows (in one link
// group), sorted.
func partners(rows []linkRow, i int) []string {
	out := []string{}
	if rows[i].group == 0 {
		return out
	}
	for j, r := range rows {
		if j != i && r.group == rows[i].group {
			out = append(out, r.username)
		}
	}
	slices.Sort(out)
	return out
}

// applyPlan returns rows with the person_ids of set written.
func applyPlan(rows []linkRow, set map[int64]int64) []linkRow {
	out := slices.Clone(rows)
	for i, r := range out {
		if g, ok := set[r.id]; ok {
			out[i].group = g
		}
	}
	return out
}

func indexOf(rows []linkRow, username string) int {
	return slices.IndexFunc(rows, func(r linkRow) bool { return r.username == username })
}

// planLink merges the link groups of username and sameAs (an account
// linked with none is a group of its own) into one named by its smallest
// id.
func planLink(rows []linkRow, username, sameAs string) (LinkChange, map[int64]int64, error) {
	a, b := indexOf(rows, username), indexOf(rows, sameAs)
	switch {
	case a < 0:
		return LinkChange{}, nil, ErrNotFound
	case b < 0:
		return LinkChange{}, nil, invalid(FieldSameAs, fmt.Sprintf("there is no user named %q", sameAs))
	}
	in := func(r linkRow) bool {
		return r.id == rows[a].id || r.id == rows[b].id ||
			r.group != 0 && (r.group == rows[a].group || r.group == rows[b].group)
	}
	var person int64
	for _, r := range rows {
		if in(r) && (person == 0 || r.id < person) {
			person = r.id
		}
	}
	set := map[int64]int64{}
	for _, r := range rows {
		if in(r) && r.group != person {
			set[r.id] = person
		}
	}
	return LinkChange{Before: partners(rows, a), After: partners(applyPlan(rows, set), a)}, set, nil
}

// planUnlink takes username out of its link group; the rest of the group
// is named by its smallest id, or linked with none when one is left.
func planUnlink(rows []linkRow, username string) (LinkChange, map[int64]int64, error) {
	x := indexOf(rows, username)
	if x < 0 {
		return LinkChange{}, nil, ErrNotFound
	}
	set := map[int64]int64{}
	if g := rows[x].group; g != 0 {
		set[rows[x].id] = 0
		var rest []linkRow
		for _, r := range rows {
			if r.group == g && r.id != rows[x].id {
				rest = append(rest, r)
			}
		}
		var person int64
		if len(rest) > 1 {
			person = slices.MinFunc(rest, func(a, b linkRow) int { return cmp.Compare(a.id, b.id) }).id
		}
		for _, r := range rest {
			if r.group != person {
				set[r.id] = person
			}
		}
	}
	return LinkChange{Before: partners(rows, x), After: partners(applyPlan(rows, set), x)}, set, nil
}

// relink runs plan on every account's link, read under a lock that
// serializes every relink, and writes the person_ids it returns in the
// same transaction.
func (d *DB) relink(ctx context.Context, plan linkPlan) (LinkChange, error) {
	const (
		readSQL = `SELECT id, username, coalesce(person_id, 0) FROM unstuck_console_user ORDER BY id`
		lock    = ` FOR UPDATE`
	)
	nullable := func(g int64) any {
		if g == 0 {
			return nil
		}
		return g
	}
	var ch LinkChange
	switch d.dialect {
	case DialectPostgres:
		err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
			rs, err := tx.Query(ctx, readSQL+lock)
			if err != nil {
				return err
			}
			rows, err := pgx.CollectRows(rs, func(r pgx.CollectableRow) (linkRow, error) {
				var l linkRow
				return l, r.Scan(&l.id, &l.username, &l.group)
			})
			if err != nil {
				return err
			}
			var set map[int64]int64
			if ch, set, err = plan(rows); err != nil {
				return err
			}
			for id, g := range set {
				if _, err := tx.Exec(ctx, `UPDATE unstuck_console_user SET person_id = $2 WHERE id = $1`, id, nullable(g)); err != nil {
					return err
				}
			}
			return nil
		})
		return ch, pgMapError(err)
	case DialectMySQL:
		var err error
		// The rows are locked in id order, so relinks do not deadlock one
		// another; a deadlock with another writer runs the whole
		// transaction again, a few times.
		for range 3 {
			if ch, err = d.relinkSQL(ctx, plan, readSQL+lock, `UPDATE unstuck_console_user SET person_id = ? WHERE id = ?`, nullable); !migratemysql.IsMySQLError(err, mysqlErrDeadlock) {
				break
			}
		}
		return ch, err
	}
	err := migratesqlite.Immediate(ctx, d.sqlite, func(conn *sql.Conn) error {
		var err error
		ch, err = relinkOn(ctx, conn, plan, readSQL, `UPDATE unstuck_console_user SET person_id = ?1 WHERE id = ?2`, nullable)
		return err
	})
	return ch, err
}

// relinkSQL is relink on MySQL: one transaction of database/sql.
func (d *DB) relinkSQL(ctx context.Context, plan linkPlan, readSQL, updateSQL string, nullable func(int64) any) (LinkChange, error) {
	tx, err := d.sqlite.BeginTx(ctx, nil)
	if err != nil {
		return LinkChange{}, err
	}
	defer func() { _ = tx.Rollback() }()
	ch, err := relinkOn(ctx, tx, plan, readSQL, updateSQL, nullable)
	if err != nil {
		return ch, err
	}
	return ch, tx.Commit()
}

// relinkOn reads the links with readSQL, plans, and writes with updateSQL
// (person_id, then id) on db, a connection or transaction of
// database/sql.
func relinkOn(ctx context.Context, db sqliteExecutor, plan linkPlan, readSQL, updateSQL string, nullable func(int64) any) (LinkChange, error) {
	rs, err := db.QueryContext(ctx, readSQL)
	if err != nil {
		return LinkChange{}, err
	}
	var rows []linkRow
	for rs.Next() {
		var l linkRow
		if err := rs.Scan(&l.id, &l.username, &l.group); err != nil {
			_ = rs.Close()
			return LinkChange{}, err
		}
		rows = append(rows, l)
	}
	if err := cmp.Or(rs.Err(), rs.Close()); err != nil {
		return LinkChange{}, err
	}
	ch, set, err := plan(rows)
	if err != nil {
		return ch, err
	}
	for id, g := range set {
		if _, err := db.ExecContext(ctx, updateSQL, nullable(g), id); err != nil {
			return ch, err
		}
	}
	return ch, nil
}
