// Package sqlstore holds the SQL of the saga drivers, shared by
// saga/sagapgx and saga/sagasqlite. Queries are written once, with $N
// placeholders, in the SQL both dialects accept; the Dialect adapts the
// placeholders, times and JSON.
package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// Rows is the part of pgx.Rows and *sql.Rows the store uses.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Querier runs statements on one transaction.
type Querier interface {
	// Exec runs a statement and returns the rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Query runs a query; close is called once the rows are read.
	Query(ctx context.Context, query string, args ...any) (Rows, func(), error)
}

// Dialect adapts the shared SQL to a database.
type Dialect struct {
	// Rebind rewrites $N placeholders if the database needs another form.
	Rebind func(string) string
	// Time converts a time into the column's representation.
	Time func(time.Time) any
	// JSON converts raw JSON (nil for NULL) into an argument.
	JSON func([]byte) any
	// ForUpdate is the suffix that locks the selected rows.
	ForUpdate string
	// IsUniqueViolation reports a unique-constraint error.
	IsUniqueViolation func(error) bool
	// NowSQL selects the database's clock; "" means the process clock.
	NowSQL string
	// Statistics reads the planner's statistics of the operation table,
	// for estimated counts; nil means every count is exact.
	Statistics func(ctx context.Context, q Querier) (Statistics, error)
}

// Store runs the driver methods on a Querier.
type Store struct{ D Dialect }

func (s Store) q(query string) string {
	if s.D.Rebind != nil {
		return s.D.Rebind(query)
	}
	return query
}

func (s Store) timeArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return s.D.Time(*t)
}

// nullTime scans a timestamptz (time.Time), a Unix-microseconds integer or
// NULL.
type nullTime struct{ t **time.Time }

func (n nullTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*n.t = nil
	case time.Time:
		u := v.UTC()
		*n.t = &u
	case int64:
		u := time.UnixMicro(v).UTC()
		*n.t = &u
	default:
		return fmt.Errorf("sqlstore: cannot scan %T into a time", src)
	}
	return nil
}

// reqTime scans a NOT NULL time.
type reqTime struct{ t *time.Time }

func (r reqTime) Scan(src any) error {
	var p *time.Time
	if err := (nullTime{&p}).Scan(src); err != nil {
		return err
	}
	if p == nil {
		return errors.New("sqlstore: NULL in a NOT NULL time")
	}
	*r.t = *p
	return nil
}

// jsonCol scans JSON text or bytes, keeping NULL as nil.
type jsonCol struct{ b *json.RawMessage }

func (j jsonCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*j.b = nil
	case []byte:
		*j.b = append([]byte(nil), v...)
	case string:
		*j.b = []byte(v)
	default:
		// pgx hands a jsonb decoded for database/sql as a map or a
		// string; the drivers select it as text, so this is unexpected.
		return fmt.Errorf("sqlstore: cannot scan %T into JSON", src)
	}
	return nil
}

const opColumns = `id, type, status, correlation_id, input, current_step, last_error, review_reason, resolution, version, created_at, updated_at, finished_at, definition_version`

const stepColumns = `operation_id, name, seq, kind, system, status, idempotency_key, external_id, result, attempts, max_attempts, verifications,
 last_error, last_error_class, compensable, comp_seq, comp_key, comp_status, comp_attempts, comp_max_attempts, comp_error, generation,
 started_at, finished_at, updated_at, unkeyed, verifiable`

// Now implements sagadriver.Driver with the statement nowSQL, which selects the
// database's clock; an empty nowSQL means the process clock.
func (s Store) Now(ctx context.Context, q Querier, nowSQL string) (time.Time, error) {
	if nowSQL == "" {
		return time.Now().UTC().Truncate(time.Microsecond), nil
	}
	rows, done, err := q.Query(ctx, nowSQL)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	defer done()
	var t time.Time
	if rows.Next() {
		err = rows.Scan(reqTime{&t})
	} else {
		err = errors.New("no row")
	}
	if err = errors.Join(err, rows.Err()); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return t.UTC().Truncate(time.Microsecond), nil
}

// InsertOperation implements sagadriver.Driver.
func (s Store) InsertOperation(ctx context.Context, q Querier, op *sagadriver.Operation) error {
	_, err := q.Exec(ctx, s.q(`INSERT INTO unstuck_saga_operation (`+opColumns+`)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`),
		op.ID, op.Type, string(op.Status), op.CorrelationID, s.D.JSON(op.Input), op.CurrentStep, op.LastError, op.ReviewReason,
		op.Resolution, op.Version, s.D.Time(op.CreatedAt), s.D.Time(op.UpdatedAt), s.timeArg(op.FinishedAt), definitionVersion(op))
	if err != nil {
		if s.D.IsUniqueViolation(err) {
			return fmt.Errorf("%w: %s", sagadriver.ErrExists, op.ID)
		}
		return fmt.Errorf("insert operation: %w", err)
	}
	for i := range op.Steps {
		if err := s.insertStep(ctx, q, op.ID, &op.Steps[i]); err != nil {
			return err
		}
	}
	return nil
}

// definitionVersion is the version an operation records: 1 when unset.
func definitionVersion(op *sagadriver.Operation) int { return max(op.DefinitionVersion, 1) }

func (s Store) insertStep(ctx context.Context, q Querier, opID string, st *sagadriver.StepRecord) error {
	_, err := q.Exec(ctx, s.q(`INSERT INTO unstuck_saga_step (`+stepColumns+`)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27)`),
		opID, st.Name, st.Seq, string(st.Kind), st.System, string(st.Status), st.Key, st.ExternalID, s.D.JSON(st.Result),
		st.Attempts, st.MaxAttempts, st.Verifications, st.LastError, string(st.LastErrorClass), st.Compensable, st.CompSeq,
		st.CompKey, string(st.CompStatus), st.CompAttempts, st.CompMaxAttempts, st.CompError, st.Generation,
		s.timeArg(st.StartedAt), s.timeArg(st.FinishedAt), s.D.Time(st.UpdatedAt), st.Unkeyed, st.Verifiable)
	if err != nil {
		return fmt.Errorf("insert step %s: %w", st.Name, err)
	}
	return nil
}

// GetOperation implements sagadriver.Driver.
func (s Store) GetOperation(ctx context.Context, q Querier, id string, forUpdate bool) (sagadriver.Operation, error) {
	query := `SELECT ` + opColumns + ` FROM unstuck_saga_operation WHERE id = $1`
	if forUpdate {
		query += s.D.ForUpdate
	}
	ops, err := s.queryOperations(ctx, q, s.q(query), id)
	if err != nil {
		return sagadriver.Operation{}, err
	}
	if len(ops) == 0 {
		return sagadriver.Operation{}, fmt.Errorf("%w: operation %s", sagadriver.ErrNotFound, id)
	}
	return ops[0], nil
}

func (s Store) queryOperations(ctx context.Context, q Querier, query string, args ...any) ([]sagadriver.Operation, error) {
	rows, done, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("select operations: %w", err)
	}
	var ops []sagadriver.Operation
	for rows.Next() {
		var op sagadriver.Operation
		var status string
		if err := rows.Scan(&op.ID, &op.Type, &status, &op.CorrelationID, jsonCol{&op.Input}, &op.CurrentStep, &op.LastError,
			&op.ReviewReason, &op.Resolution, &op.Version, reqTime{&op.CreatedAt}, reqTime{&op.UpdatedAt}, nullTime{&op.FinishedAt},
			&op.DefinitionVersion); err != nil {
			done()
			return nil, fmt.Errorf("scan operation: %w", err)
		}
		op.Status = sagadriver.Status(status)
		ops = append(ops, op)
	}
	err = rows.Err()
	done()
	if err != nil {
		return nil, fmt.Errorf("select operations: %w", err)
	}
	for i := range ops {
		if ops[i].Steps, err = s.steps(ctx, q, ops[i].ID); err != nil {
			return nil, err
		}
	}
	return ops, nil
}

func (s Store) steps(ctx context.Context, q Querier, opID string) ([]sagadriver.StepRecord, error) {
	rows, done, err := q.Query(ctx, s.q(`SELECT `+stepColumns+` FROM unstuck_saga_step WHERE operation_id = $1 ORDER BY seq`), opID)
	if err != nil {
		return nil, fmt.Errorf("select steps: %w", err)
	}
	defer done()
	var out []sagadriver.StepRecord
	for rows.Next() {
		var st sagadriver.StepRecord
		var opid, kind, status, class, comp string
		if err := rows.Scan(&opid, &st.Name, &st.Seq, &kind, &st.System, &status, &st.Key, &st.ExternalID, jsonCol{&st.Result},
			&st.Attempts, &st.MaxAttempts, &st.Verifications, &st.LastError, &class, &st.Compensable, &st.CompSeq, &st.CompKey,
			&comp, &st.CompAttempts, &st.CompMaxAttempts, &st.CompError, &st.Generation,
			nullTime{&st.StartedAt}, nullTime{&st.FinishedAt}, reqTime{&st.UpdatedAt}, &st.Unkeyed, &st.Verifiable); err != nil {
			return nil, fmt.Errorf("scan step: %w", err)
		}
		st.Kind, st.Status, st.LastErrorClass, st.CompStatus = sagadriver.Kind(kind), sagadriver.StepStatus(status), sagadriver.Class(class), sagadriver.CompStatus(comp)
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select steps: %w", err)
	}
	return out, nil
}

// UpdateOperation implements sagadriver.Driver.
func (s Store) UpdateOperation(ctx context.Context, q Querier, op *sagadriver.Operation) error {
	n, err := q.Exec(ctx, s.q(`UPDATE unstuck_saga_operation SET status = $1, current_step = $2, last_error = $3, review_reason = $4,
 resolution = $5, version = version + 1, updated_at = $6, finished_at = $7, definition_version = $8 WHERE id = $9 AND version = $10`),
		string(op.Status), op.CurrentStep, op.LastError, op.ReviewReason, op.Resolution, s.D.Time(op.UpdatedAt),
		s.timeArg(op.FinishedAt), definitionVersion(op), op.ID, op.Version)
	if err != nil {
		return fmt.Errorf("update operation: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s at version %d", sagadriver.ErrStale, op.ID, op.Version)
	}
	for i := range op.Steps {
		st := &op.Steps[i]
		n, err := q.Exec(ctx, s.q(`UPDATE unstuck_saga_step SET status = $1, external_id = $2, result = $3, attempts = $4,
 verifications = $5, last_error = $6, last_error_class = $7, comp_status = $8, comp_attempts = $9, comp_error = $10,
 generation = $11, started_at = $12, finished_at = $13, updated_at = $14, idempotency_key = $15, kind = $16, system = $17,
 max_attempts = $18, compensable = $19, comp_seq = $20, comp_max_attempts = $21, unkeyed = $22, verifiable = $23
 WHERE operation_id = $24 AND name = $25`),
			string(st.Status), st.ExternalID, s.D.JSON(st.Result), st.Attempts, st.Verifications, st.LastError,
			string(st.LastErrorClass), string(st.CompStatus), st.CompAttempts, st.CompError, st.Generation,
			s.timeArg(st.StartedAt), s.timeArg(st.FinishedAt), s.D.Time(st.UpdatedAt), st.Key, string(st.Kind), st.System,
			st.MaxAttempts, st.Compensable, st.CompSeq, st.CompMaxAttempts, st.Unkeyed, st.Verifiable, op.ID, st.Name)
		if err != nil {
			return fmt.Errorf("update step %s: %w", st.Name, err)
		}
		if n == 0 {
			// A step appended to the definition, which a redrive moved
			// the operation to.
			if err := s.insertStep(ctx, q, op.ID, st); err != nil {
				return err
			}
		}
	}
	op.Version++
	return nil
}

// InsertEvents implements sagadriver.Driver.
func (s Store) InsertEvents(ctx context.Context, q Querier, events []sagadriver.Event) error {
	for _, e := range events {
		if _, err := q.Exec(ctx, s.q(`INSERT INTO unstuck_saga_event (operation_id, step, action, from_status, to_status, actor, message, attempt, at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`),
			e.OperationID, e.Step, e.Action, e.From, e.To, e.Actor, e.Message, e.Attempt, s.D.Time(e.At)); err != nil {
			return fmt.Errorf("insert event: %w", err)
		}
	}
	return nil
}

// ListEvents implements sagadriver.Driver.
func (s Store) ListEvents(ctx context.Context, q Querier, opID string) ([]sagadriver.Event, error) {
	rows, done, err := q.Query(ctx, s.q(`SELECT id, operation_id, step, action, from_status, to_status, actor, message, attempt, at
FROM unstuck_saga_event WHERE operation_id = $1 ORDER BY id`), opID)
	if err != nil {
		return nil, fmt.Errorf("select events: %w", err)
	}
	defer done()
	var out []sagadriver.Event
	for rows.Next() {
		var e sagadriver.Event
		if err := rows.Scan(&e.ID, &e.OperationID, &e.Step, &e.Action, &e.From, &e.To, &e.Actor, &e.Message, &e.Attempt, reqTime{&e.At}); err != nil {
			return nil, fmt.Errorf("scan event: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select events: %w", err)
	}
	return out, nil
}

// ListOperations implements sagadriver.Driver.
func (s Store) ListOperations(ctx context.Context, q Querier, p sagadriver.ListParams) ([]sagadriver.Operation, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if len(p.Statuses) > 0 {
		ph := make([]string, len(p.Statuses))
		for i, st := range p.Statuses {
			ph[i] = arg(string(st))
		}
		where = append(where, "status IN ("+strings.Join(ph, ", ")+")")
	}
	if !p.UpdatedBefore.IsZero() {
		where = append(where, "updated_at < "+arg(s.D.Time(p.UpdatedBefore)))
	}
	if !p.FinishedAfter.IsZero() {
		where = append(where, "finished_at > "+arg(s.D.Time(p.FinishedAfter)))
	}
	query := `SELECT ` + opColumns + ` FROM unstuck_saga_operation`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	query += " ORDER BY updated_at, id LIMIT " + arg(limit)
	return s.queryOperations(ctx, q, s.q(query), args...)
}

// InsertFinding implements sagadriver.Driver.
func (s Store) InsertFinding(ctx context.Context, q Querier, f *sagadriver.Finding) (bool, error) {
	rows, done, err := q.Query(ctx, s.q(`SELECT id FROM unstuck_saga_finding WHERE operation_id = $1 AND step = $2 AND kind = $3 AND resolved_at IS NULL`),
		f.OperationID, f.Step, f.Kind)
	if err != nil {
		return false, fmt.Errorf("select finding: %w", err)
	}
	exists := rows.Next()
	err = rows.Err()
	done()
	if err != nil {
		return false, fmt.Errorf("select finding: %w", err)
	}
	if exists {
		return false, nil
	}
	var supersedes any
	if f.Supersedes != 0 {
		supersedes = f.Supersedes
	}
	rows, done, err = q.Query(ctx, s.q(`INSERT INTO unstuck_saga_finding (operation_id, step, kind, external_id, detail, detected_at, fingerprint, supersedes)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`), f.OperationID, f.Step, f.Kind, f.ExternalID, f.Detail, s.D.Time(f.DetectedAt),
		f.Fingerprint, supersedes)
	if err != nil {
		return false, fmt.Errorf("insert finding: %w", err)
	}
	defer done()
	if !rows.Next() {
		return false, fmt.Errorf("insert finding: no id returned: %w", rows.Err())
	}
	if err := rows.Scan(&f.ID); err != nil {
		return false, fmt.Errorf("insert finding: %w", err)
	}
	return true, nil
}

// ListFindings implements sagadriver.Driver.
func (s Store) ListFindings(ctx context.Context, q Querier, opID string, open bool) ([]sagadriver.Finding, error) {
	query := `SELECT id, operation_id, step, kind, external_id, detail, detected_at, resolved_at, resolved_by, fingerprint, COALESCE(supersedes, 0)
FROM unstuck_saga_finding WHERE ($1 = '' OR operation_id = $1)`
	if open {
		query += ` AND resolved_at IS NULL`
	}
	rows, done, err := q.Query(ctx, s.q(query+` ORDER BY id`), opID)
	if err != nil {
		return nil, fmt.Errorf("select findings: %w", err)
	}
	defer done()
	var out []sagadriver.Finding
	for rows.Next() {
		var f sagadriver.Finding
		if err := rows.Scan(&f.ID, &f.OperationID, &f.Step, &f.Kind, &f.ExternalID, &f.Detail, reqTime{&f.DetectedAt}, nullTime{&f.ResolvedAt},
			&f.ResolvedBy, &f.Fingerprint, &f.Supersedes); err != nil {
			return nil, fmt.Errorf("scan finding: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select findings: %w", err)
	}
	return out, nil
}

// ResolveFindings implements sagadriver.Driver.
func (s Store) ResolveFindings(ctx context.Context, q Querier, opID string, at time.Time, by string) (int, error) {
	n, err := q.Exec(ctx, s.q(`UPDATE unstuck_saga_finding SET resolved_at = $1, resolved_by = $2 WHERE operation_id = $3 AND resolved_at IS NULL`),
		s.D.Time(at), by, opID)
	if err != nil {
		return 0, fmt.Errorf("resolve findings: %w", err)
	}
	return int(n), nil
}

// Stats implements sagadriver.Driver.
func (s Store) Stats(ctx context.Context, q Querier) (sagadriver.Stats, error) {
	st := sagadriver.Stats{Operations: map[sagadriver.Status]int{}, OldestUpdate: map[sagadriver.Status]time.Time{}}
	rows, done, err := q.Query(ctx, `SELECT status, COUNT(*), MIN(updated_at) FROM unstuck_saga_operation GROUP BY status`)
	if err != nil {
		return st, fmt.Errorf("count operations: %w", err)
	}
	for rows.Next() {
		var status string
		var n int
		var oldest time.Time
		if err := rows.Scan(&status, &n, reqTime{&oldest}); err != nil {
			done()
			return st, fmt.Errorf("count operations: %w", err)
		}
		st.Operations[sagadriver.Status(status)] = n
		st.OldestUpdate[sagadriver.Status(status)] = oldest
	}
	err = rows.Err()
	done()
	if err != nil {
		return st, fmt.Errorf("count operations: %w", err)
	}
	for _, c := range []struct {
		query string
		dst   *int
	}{
		{`SELECT COUNT(*) FROM unstuck_saga_step WHERE status = 'compensation_failed'`, &st.FailedCompensations},
	} {
		rows, done, err := q.Query(ctx, c.query)
		if err != nil {
			return st, fmt.Errorf("stats: %w", err)
		}
		if rows.Next() {
			err = rows.Scan(c.dst)
		}
		err = errors.Join(err, rows.Err())
		done()
		if err != nil {
			return st, fmt.Errorf("stats: %w", err)
		}
	}
	// The open findings and the oldest one's detection, in one read of the
	// open rows (the partial index unstuck_saga_finding_open_idx).
	rows, done, err = q.Query(ctx, `SELECT COUNT(*), MIN(detected_at) FROM unstuck_saga_finding WHERE resolved_at IS NULL`)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	var oldest *time.Time
	if rows.Next() {
		err = rows.Scan(&st.OpenFindings, nullTime{&oldest})
	}
	err = errors.Join(err, rows.Err())
	done()
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	if oldest != nil {
		st.OldestOpenFinding = *oldest
	}
	return st, nil
}

// Import implements sagadriver.Importer on q's transaction, statement by
// statement.
func (s Store) Import(ctx context.Context, q Querier, ops []sagadriver.Operation, events []sagadriver.Event, findings []sagadriver.Finding) error {
	for i := range ops {
		if err := s.InsertOperation(ctx, q, &ops[i]); err != nil {
			return fmt.Errorf("import: %w", err)
		}
	}
	if err := s.InsertEvents(ctx, q, events); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	for _, f := range findings {
		var supersedes any
		if f.Supersedes != 0 {
			supersedes = f.Supersedes
		}
		if _, err := q.Exec(ctx, s.q(`INSERT INTO unstuck_saga_finding (operation_id, step, kind, external_id, detail, detected_at,
 resolved_at, resolved_by, fingerprint, supersedes) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`),
			f.OperationID, f.Step, f.Kind, f.ExternalID, f.Detail, s.D.Time(f.DetectedAt), s.timeArg(f.ResolvedAt), f.ResolvedBy,
			f.Fingerprint, supersedes); err != nil {
			return fmt.Errorf("import finding: %w", err)
		}
	}
	return nil
}
