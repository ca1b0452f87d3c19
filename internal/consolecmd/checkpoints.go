package consolecmd

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/unstuckhq/unstuck/internal/audit"
)

// checkpointFilePrefix and checkpointFileSuffix name the files a
// checkpoint directory holds, one checkpoint each.
const (
	checkpointFilePrefix = "unstuck-audit-checkpoint-"
	checkpointFileSuffix = ".txt"
)

// checkpointFlags are serve's (and demo's) scheduled checkpoints outside
// the database (SPEC K24).
type checkpointFlags struct {
	dir   *string
	every *time.Duration
}

func addCheckpointFlags(fs *flag.FlagSet, getenv func(string) string) checkpointFlags {
	return checkpointFlags{
		dir: fs.String("audit-checkpoint-dir", getenv("UNSTUCK_AUDIT_CHECKPOINT_DIR"),
			"write a checkpoint of the audit trail, one file each, to this `directory` at start and every --audit-checkpoint-every: point it at storage the database's owner cannot rewrite (WORM, another account) (env UNSTUCK_AUDIT_CHECKPOINT_DIR)"),
		every: fs.Duration("audit-checkpoint-every", cmp.Or(envDuration(getenv, "UNSTUCK_AUDIT_CHECKPOINT_EVERY"), time.Hour),
			"how often to write a checkpoint to --audit-checkpoint-dir (env UNSTUCK_AUDIT_CHECKPOINT_EVERY)"),
	}
}

func (f checkpointFlags) check() error {
	if *f.dir == "" {
		return nil
	}
	if *f.every < time.Minute {
		return errors.New("--audit-checkpoint-every must be at least 1m")
	}
	st, err := os.Stat(*f.dir)
	if err != nil || !st.IsDir() {
		return fmt.Errorf("--audit-checkpoint-dir %q is not a directory", *f.dir)
	}
	return nil
}

// writeCheckpoint writes c to out: into a new file of its own when out is
// a directory (never overwriting one), else appended as a line to the
// file out (created if missing).
func writeCheckpoint(out string, c audit.Checkpoint) (string, error) {
	line := c.String() + "\n"
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		name := filepath.Join(out, fmt.Sprintf("%s%s-%020d%s", checkpointFilePrefix, c.At.UTC().Format("20060102T150405.000000Z"), c.Seq, checkpointFileSuffix))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
		if err != nil {
			return "", fmt.Errorf("write the checkpoint: %w", err)
		}
		if _, err := f.WriteString(line); err != nil {
			_ = f.Close()
			return "", fmt.Errorf("write the checkpoint: %w", err)
		}
		return name, f.Close()
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return "", fmt.Errorf("write the checkpoint: %w", err)
	}
	if _, err := f.WriteString(line); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("write the checkpoint: %w", err)
	}
	return out, f.Close()
}

// readCheckpoints reads every checkpoint in path: the lines of a file, or
// of each checkpoint file of a directory. Blank lines and lines starting
// with # are skipped; any other line that is not a checkpoint is an error
// naming its file and line.
func readCheckpoints(path string) ([]audit.Checkpoint, error) {
	files := []string{path}
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if st.IsDir() {
		files, err = filepath.Glob(filepath.Join(path, checkpointFilePrefix+"*"+checkpointFileSuffix))
		if err != nil {
			return nil, err
		}
	}
	var out []audit.Checkpoint
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		lines := bufio.NewScanner(f)
		for n := 1; lines.Scan(); n++ {
			line := strings.TrimSpace(lines.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			c, err := audit.ParseCheckpoint(line)
			if err != nil {
				_ = f.Close()
				return nil, fmt.Errorf("%s:%d: %w", name, n, err)
			}
			out = append(out, c)
		}
		err = lines.Err()
		_ = f.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// newestCheckpoint is the time of the newest checkpoint in cs (zero when
// none).
func newestCheckpoint(cs []audit.Checkpoint) time.Time {
	var t time.Time
	for _, c := range cs {
		if c.At.After(t) {
			t = c.At
		}
	}
	return t
}

// externalCheckpoints writes the trail's checkpoints to a directory on a
// schedule and says when the newest one there was made.
type externalCheckpoints struct {
	trail *audit.Trail
	dir   string
	every time.Duration
	log   *slog.Logger
	// newest is the Unix microseconds of the newest checkpoint written or
	// found in dir; 0 when none. upToDate is when the directory was last
	// brought up to date: a checkpoint written, or none due (an empty
	// trail).
	newest, upToDate atomic.Int64
}

// startExternalCheckpoints writes a checkpoint of trail to dir now and
// every every until ctx ends, and registers on reg when the directory was
// last brought up to date and the age past which that is overdue (the
// alert UnstuckAuditCheckpointStale compares them). It returns nil when
// dir is "".
func startExternalCheckpoints(ctx context.Context, trail *audit.Trail, f checkpointFlags, reg prometheus.Registerer, log *slog.Logger) *externalCheckpoints {
	if *f.dir == "" {
		return nil
	}
	x := &externalCheckpoints{trail: trail, dir: *f.dir, every: *f.every, log: log}
	if cs, err := readCheckpoints(x.dir); err != nil {
		log.Error("audit checkpoints: reading the directory failed", "dir", x.dir, "error", err.Error())
	} else if t := newestCheckpoint(cs); !t.IsZero() {
		x.newest.Store(t.UnixMicro())
		x.upToDate.Store(t.UnixMicro())
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "unstuck_audit_checkpoint_external_last_success_timestamp_seconds",
		Help: "When the audit trail's checkpoints outside the database (--audit-checkpoint-dir) were last brought up to date, in Unix seconds: a checkpoint written, or none due for an empty trail; 0 when never.",
	}, func() float64 { return float64(x.upToDate.Load()) / 1e6 }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "unstuck_audit_checkpoint_external_max_age_seconds",
		Help: "The age past which the checkpoints outside the database are overdue: twice --audit-checkpoint-every.",
	}, func() float64 { return x.MaxAge().Seconds() }))
	go func() {
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			x.write(ctx)
			t.Reset(x.every)
		}
	}()
	return x
}

// write makes a checkpoint and writes it to the directory, logging a
// failure: a broken chain makes none, and says where it broke.
func (x *externalCheckpoints) write(ctx context.Context) {
	c, v, err := x.trail.Checkpoint(ctx)
	switch {
	case errors.Is(err, audit.ErrEmpty):
		x.upToDate.Store(time.Now().UnixMicro())
		return
	case errors.Is(err, audit.ErrBroken):
		x.log.Error("audit checkpoint not written: the chain does not verify", "first_bad_seq", v.FirstBad, "problem", v.Problem)
		return
	case err != nil:
		if ctx.Err() == nil {
			x.log.Error("audit checkpoint not written", "error", err.Error())
		}
		return
	}
	name, err := writeCheckpoint(x.dir, c)
	if err != nil {
		x.log.Error("audit checkpoint not written to the directory", "dir", x.dir, "error", err.Error())
		return
	}
	x.newest.Store(c.At.UnixMicro())
	x.upToDate.Store(c.At.UnixMicro())
	x.log.Info("audit checkpoint written", "file", name, "seq", c.Seq)
}

// Newest is when the newest checkpoint outside the database was made; ok
// is false when there is none.
func (x *externalCheckpoints) Newest() (time.Time, bool) {
	us := x.newest.Load()
	return time.UnixMicro(us).UTC(), us != 0
}

// MaxAge is the age past which the newest checkpoint is overdue.
func (x *externalCheckpoints) MaxAge() time.Duration { return 2 * x.every }

// sealKeying seals the audit trail's keying marker if a migration run
// without the audit key left it unsealed; a marker that disagrees with the
// chain stays unsealed, and the verification on /audit says why.
func sealKeying(ctx context.Context, db *database, log *slog.Logger) {
	sealed, err := db.Trail.SealKeying(ctx)
	switch {
	case err != nil:
		log.Error("audit keying marker not sealed", "error", err.Error())
	case sealed:
		log.Info("audit keying marker sealed with the audit key")
	}
}
