package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
)

// The experiments that kill the application re-execute this binary (the
// harness, or the test binary) with childEnv naming the child's role and
// its parameters in further FAULTS_* variables.
const (
	childEnv     = "UNSTUCK_FAULTS_CHILD"
	childSQLite  = "sqlite-writer" // runs every key on a SQLite store
	childHolder  = "pg-holder"     // runs one key on PostgreSQL and blocks in its callback
	holdingLine  = "holding"       // the holder's line once its callback runs
	childTimeout = 5 * time.Minute // a child never outlives this, whatever happens
)

// childMain runs the child role named by childEnv and returns the exit
// code.
func childMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	var err error
	switch os.Getenv(childEnv) {
	case childSQLite:
		err = sqliteWriter(ctx)
	case childHolder:
		err = pgHolder(ctx)
	default:
		err = fmt.Errorf("unknown child role %q", os.Getenv(childEnv))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "faults child: %v\n", err)
		return 1
	}
	return 0
}

// childCommand returns a command that re-executes this binary as a child
// with role and the given FAULTS_* variables.
func childCommand(ctx context.Context, role string, vars map[string]string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), childEnv+"="+role)
	for k, v := range vars {
		cmd.Env = append(cmd.Env, "FAULTS_"+k+"="+v)
	}
	cmd.Stderr = os.Stderr
	return cmd, nil
}

func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv("FAULTS_" + name))
	return n
}

func envDuration(name string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv("FAULTS_" + name))
	return d
}

// sqliteWriter runs every key on the SQLite store of FAULTS_DB with
// FAULTS_WORKERS workers until each is final or FAULTS_DEADLINE passes.
// Each effect appends the key's line to FAULTS_EFFECTS (O_APPEND, one
// write) before the run completes.
func sqliteWriter(ctx context.Context) error {
	db, err := idemsqlite.Open(os.Getenv("FAULTS_DB"))
	if err != nil {
		return err
	}
	defer db.Close()
	store := idemsqlite.New(db)
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	eng, err := newEngine(store, slog.New(slog.NewTextHandler(io.Discard, nil)), os.Getenv("FAULTS_POLICY"))
	if err != nil {
		return err
	}
	f, err := os.OpenFile(os.Getenv("FAULTS_EFFECTS"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	keys := makeKeys("sqlite-kill", envInt("KEYS"))
	lease, work := envDuration("LEASE"), envDuration("WORK")
	deadline := time.Now().Add(envDuration("DEADLINE"))
	final := make([]atomic.Bool, len(keys))
	for time.Now().Before(deadline) {
		var next atomic.Int64
		var left atomic.Int64
		var wg sync.WaitGroup
		for range envInt("WORKERS") {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1) - 1; i < int64(len(keys)); i = next.Add(1) - 1 {
					if final[i].Load() {
						continue
					}
					key := keys[i]
					_, err := idem.Run(ctx, eng, key, scopeName, func(context.Context) (string, error) {
						if _, err := f.WriteString(key + "\n"); err != nil {
							return "", err
						}
						time.Sleep(work)
						return "value of " + key, nil
					}, &idem.RunOpts{Lease: lease})
					var ip *idem.InProgressError
					switch {
					case err == nil, isUnrecorded(err), errors.Is(err, idem.ErrResultUnavailable),
						errors.As(err, &ip) && ip.Status == idemdriver.StatusPending:
						final[i].Store(true)
					default:
						left.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if left.Load() == 0 {
			return shutdown(ctx, eng)
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return shutdown(ctx, eng)
}

// sqliteKillExperiment: a writer process runs keys on a SQLite store under
// write load and is killed with SIGKILL at random moments, again and
// again; a last writer finishes. Then the effects file is counted and the
// database checked: it opens, passes integrity_check, and its records
// agree with the effects.
func sqliteKillExperiment(ctx context.Context, sc scale) ([]row, error) {
	var rows []row
	for _, policy := range policies {
		r, err := sqliteKill(ctx, sc, policy)
		rows = append(rows, r)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

func sqliteKill(ctx context.Context, sc scale, policy string) (row, error) {
	keys := sc.sqliteKeys
	r := row{Name: "sqlite-kill" + policySuffix(policy), Path: "idem.Run", Store: "SQLite", Mode: modeName("plain", policy),
		Fault: fmt.Sprintf("writer process (%d workers, 20 ms effects) killed with SIGKILL ×%d", sc.workers, sc.sqliteRun), Keys: keys}
	dir, err := os.MkdirTemp("", "faults-sqlite-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	dbPath, effPath := filepath.Join(dir, "idem.db"), filepath.Join(dir, "effects")
	vars := map[string]string{
		"DB": dbPath, "EFFECTS": effPath, "KEYS": strconv.Itoa(keys), "WORKERS": strconv.Itoa(sc.workers),
		"LEASE": sc.lease.String(), "POLICY": policy, "WORK": "20ms",
	}
	for i := 0; i <= sc.sqliteRun; i++ {
		last := i == sc.sqliteRun
		vars["DEADLINE"] = "10s"
		if last {
			vars["DEADLINE"] = (2*sc.lease + 20*time.Second).String()
		}
		cmd, err := childCommand(ctx, childSQLite, vars)
		if err != nil {
			return r, err
		}
		if err := cmd.Start(); err != nil {
			return r, err
		}
		if last {
			if err := cmd.Wait(); err != nil {
				return r, fmt.Errorf("last writer: %w", err)
			}
			break
		}
		sleep(ctx, time.Duration(150+rand.IntN(450))*time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		r.Faults++
	}
	counts, err := countLines(effPath)
	if err != nil {
		return r, err
	}
	for _, k := range makeKeys("sqlite-kill", keys) {
		switch n := counts[k]; {
		case n > 1:
			r.RanTwice++
		case n == 0:
			r.Lost++
		}
	}
	r.Note = checkSQLite(ctx, dbPath, &r)
	if r.RanTwice > 0 {
		r.Note = "ran twice only after a crash (the writer was killed); " + r.Note
	}
	return r, nil
}

// checkSQLite opens the database after the kills, checks its integrity and
// counts its records into r; it returns what it found, for the note.
func checkSQLite(ctx context.Context, path string, r *row) string {
	db, err := idemsqlite.Open(path)
	if err != nil {
		return "database does not open: " + err.Error()
	}
	defer db.Close()
	var check string
	if err := db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil {
		return "integrity_check failed: " + err.Error()
	}
	var total, badCompleted int
	statuses := map[string]int{}
	err = idemsqlite.New(db).EachKey(ctx, idemdriver.KeyFilter{}, idemdriver.MaxLimit, func(recs []idemdriver.Record) error {
		for _, rec := range recs {
			total++
			statuses[string(rec.Status)]++
			if rec.Status == idemdriver.StatusCompleted && rec.Result == nil {
				badCompleted++
			}
		}
		return nil
	})
	if err != nil {
		return "records unreadable: " + err.Error()
	}
	r.Processing, r.Pending = statuses["processing"], statuses["pending"]
	return fmt.Sprintf("file opens, integrity_check %s, %d records, %d completed without a result", check, total, badCompleted)
}

// countLines counts the lines of the file at path.
func countLines(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]int{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out[sc.Text()]++
	}
	return out, sc.Err()
}

// policySuffix names a recovery policy in an experiment name.
func policySuffix(policy string) string {
	if policy == "" {
		return ""
	}
	return "-" + policy
}

// pgHolder runs FAULTS_KEY on the PostgreSQL database of FAULTS_URL with
// FAULTS_LEASE (0: the default), prints holdingLine once its callback runs,
// and blocks there until it is killed.
func pgHolder(ctx context.Context) error {
	pool, err := pgxpool.New(ctx, os.Getenv("FAULTS_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	eng, err := newEngine(idempgx.New(pool), slog.New(slog.NewTextHandler(io.Discard, nil)), os.Getenv("FAULTS_POLICY"))
	if err != nil {
		return err
	}
	var opts idem.RunOpts
	if l := envDuration("LEASE"); l > 0 {
		opts.Lease = l
	}
	_, err = idem.Run(ctx, eng, os.Getenv("FAULTS_KEY"), scopeName, func(ctx context.Context) (string, error) {
		fmt.Println(holdingLine)
		<-ctx.Done()
		return "", ctx.Err()
	}, &opts)
	return err
}

// crashRecoveryExperiment: an application process runs a key and is
// killed with SIGKILL inside the callback; another process then repeats
// the key until it can be used again: run again (rerun) or escalated to
// pending for an operator (escalate). The row's note says how long that
// took after the kill, with the scale's crash lease (the default lease at
// full scale).
func crashRecoveryExperiment(ctx context.Context, env *pgEnv, sc scale) ([]row, error) {
	var rows []row
	for _, policy := range policies {
		r, err := crashRecovery(ctx, env, sc, policy)
		rows = append(rows, r)
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

func crashRecovery(ctx context.Context, env *pgEnv, sc scale, policy string) (row, error) {
	lease := sc.crashLease
	leaseText := lease.String()
	if lease == 0 {
		leaseText = "default " + idem.DefaultLease.String()
	}
	r := row{Name: "crash-recovery" + policySuffix(policy), Path: "idem.Run", Store: "PostgreSQL", Mode: modeName("plain", policy),
		Fault: "kill -9 of the application process inside the callback (lease " + leaseText + ")", Keys: 1, Faults: 1}
	db, err := env.newDatabase(ctx, 4, "")
	if err != nil {
		return r, err
	}
	defer db.close()
	const key = "crash-recovery-key-000001"
	directURL := strings.Replace(env.cluster.URL(), "/postgres?", "/"+db.name+"?", 1)
	cmd, err := childCommand(ctx, childHolder, map[string]string{"URL": directURL, "KEY": key, "LEASE": lease.String(), "POLICY": policy})
	if err != nil {
		return r, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return r, err
	}
	if err := cmd.Start(); err != nil {
		return r, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != holdingLine {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return r, fmt.Errorf("holder did not start its callback: %q %v", line, err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	_ = cmd.Wait()

	eng, err := newEngine(idempgx.New(db.direct), slog.New(slog.NewTextHandler(io.Discard, nil)), policy)
	if err != nil {
		return r, err
	}
	var opts idem.RunOpts
	if lease > 0 {
		opts.Lease = lease
	}
	limit := killed.Add(max(lease, idem.DefaultLease) + time.Minute)
	for time.Now().Before(limit) && ctx.Err() == nil {
		ran := false
		_, err := idem.Run(ctx, eng, key, scopeName, func(context.Context) (string, error) {
			ran = true
			return "value", nil
		}, &opts)
		var ip *idem.InProgressError
		switch {
		case err == nil && ran:
			r.RanTwice = 1
			r.Note = fmt.Sprintf("key ran again %.1f s after the kill", time.Since(killed).Seconds())
			return r, nil
		case errors.As(err, &ip) && ip.Status == idemdriver.StatusPending:
			r.Pending = 1
			r.Note = fmt.Sprintf("key pending for an operator %.1f s after the kill", time.Since(killed).Seconds())
			return r, nil
		case err == nil, errors.Is(err, idem.ErrResultUnavailable):
			r.Note = "key answered without running: " + fmt.Sprint(err)
			return r, nil
		}
		sleep(ctx, 50*time.Millisecond)
	}
	r.Processing = 1
	r.Note = fmt.Sprintf("key still held %.0f s after the kill", time.Since(killed).Seconds())
	return r, nil
}
