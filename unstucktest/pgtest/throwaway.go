//go:build unix

package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Cluster is a throwaway PostgreSQL cluster that its owner may stop,
// crash and restart, for fault experiments: unlike the cluster that [URL]
// may start, it is never shared. It keeps its port across restarts, so
// connection strings and proxies stay valid. Its methods are safe for
// concurrent use.
type Cluster struct {
	bin  string
	cred *syscall.Credential
	dir  string
	port int

	mu sync.Mutex
	c  *cluster // the running postmaster; nil while down
}

// How [Cluster.Restart] brings the postmaster down.
const (
	// StopFast is SIGINT: pg_ctl's fast shutdown (clients disconnected,
	// checkpoint written).
	StopFast = "fast"
	// StopImmediate is SIGQUIT: pg_ctl's immediate shutdown (no checkpoint;
	// crash recovery at the next start).
	StopImmediate = "immediate"
	// StopKill is SIGKILL of the postmaster alone: its backends notice the
	// dead postmaster and exit; crash recovery at the next start.
	StopKill = "kill"
)

// BinDir returns the directory of initdb and postgres that throwaway
// clusters use: the highest major version under /usr/lib/postgresql, else
// what pg_config reports. The error says what is missing.
func BinDir() (string, error) { return binDir() }

// IsUnavailable reports whether err says that this machine cannot run a
// throwaway cluster at all (no binaries, no postgres OS user to run them as
// root), as opposed to a cluster that failed to start.
func IsUnavailable(err error) bool {
	var u *unavailableError
	return errors.As(err, &u)
}

// StartCluster runs initdb in a new temporary directory and starts a
// postmaster on a free port of 127.0.0.1, as [URL]'s throwaway cluster is
// started (fsync off, trust authentication for the postgres role), but with
// synchronous_commit on, so that a commit acknowledged before a crash of
// the server survives it. bin is
// the directory of initdb and postgres; "" finds it as [BinDir] does. The
// caller must call [Cluster.Stop]; should the caller's process die first,
// the postmaster receives SIGQUIT.
func StartCluster(ctx context.Context, bin string) (*Cluster, error) {
	if bin == "" {
		var err error
		if bin, err = binDir(); err != nil {
			return nil, err
		}
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	c, err := startInTempDir(ctx, bin, cred, durableArgs...)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(c.url)
	if err != nil {
		return nil, errors.Join(err, c.stop())
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return nil, errors.Join(err, c.stop())
	}
	return &Cluster{bin: bin, cred: cred, dir: c.dir, port: port, c: c}, nil
}

// URL returns the admin URL of the cluster's postgres database.
func (k *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", k.port)
}

// Addr returns the host:port the cluster listens on.
func (k *Cluster) Addr() string { return "127.0.0.1:" + strconv.Itoa(k.port) }

// Down brings the postmaster down as mode says ([StopFast],
// [StopImmediate] or [StopKill]) and waits until it has exited. The data
// directory is kept for [Cluster.Up].
func (k *Cluster) Down(mode string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c == nil {
		return errors.New("pgtest: cluster is already down")
	}
	var sig syscall.Signal
	switch mode {
	case StopFast:
		sig = syscall.SIGINT
	case StopImmediate:
		sig = syscall.SIGQUIT
	case StopKill:
		sig = syscall.SIGKILL
	default:
		return fmt.Errorf("pgtest: unknown stop mode %q", mode)
	}
	c := k.c
	if err := c.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal postgres: %w", err)
	}
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		return errors.New("pgtest: postgres did not exit within 30s")
	}
	k.c = nil
	return nil
}

// Up starts the postmaster again on the same port and data directory and
// waits until it accepts connections. After [StopKill] the old backends
// may hold the shared memory for a moment; Up retries for up to 30 s.
func (k *Cluster) Up(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c != nil {
		return errors.New("pgtest: cluster is already up")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		c, err := startPostmasterOn(ctx, k.bin, k.cred, k.dir, k.port, durableArgs...)
		if err == nil {
			k.c = c
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtest: restart: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Restart is [Cluster.Down] with mode, a pause of down, and [Cluster.Up].
func (k *Cluster) Restart(ctx context.Context, mode string, down time.Duration) error {
	if err := k.Down(mode); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(down):
	}
	return k.Up(ctx)
}

// Stop shuts the postmaster down, if it is up, and removes the cluster's
// files.
func (k *Cluster) Stop() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var err error
	if k.c != nil {
		err = k.c.terminate()
		k.c = nil
	}
	if rmErr := os.RemoveAll(k.dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("remove %s: %w", k.dir, rmErr))
	}
	return err
}

// LogPath returns the server log's path, for diagnostics.
func (k *Cluster) LogPath() string { return filepath.Join(k.dir, "postgres.log") }
