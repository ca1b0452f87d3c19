//go:build unix

package pgtest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cluster is a throwaway PostgreSQL cluster owned by this process.
type cluster struct {
	dir  string // temporary directory: data/, the socket and the log
	url  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the postmaster has exited
	err  error         // the postmaster's exit status, set before done closes
}

// startCluster runs initdb in a new temporary directory and starts a
// postmaster on a free port of 127.0.0.1, with fsync off and trust
// authentication for the postgres role. The postmaster is sent SIGQUIT
// (immediate shutdown) should this process die before calling stop.
func startCluster(ctx context.Context) (*cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	return startInTempDir(ctx, bin, cred)
}

// startInTempDir runs initdb in a new temporary directory and starts a
// postmaster there with the extra server arguments; the directory is
// removed again if that fails.
func startInTempDir(ctx context.Context, bin string, cred *syscall.Credential, extra ...string) (*cluster, error) {
	// Not t.TempDir: as root its parent is private, which postgres cannot
	// traverse.
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	c, err := initAndStart(ctx, bin, cred, dir, extra...)
	if err != nil {
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", dir, rmErr))
		}
		return nil, err
	}
	return c, nil
}

func initAndStart(ctx context.Context, bin string, cred *syscall.Credential, dir string, extra ...string) (*cluster, error) {
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("chown %s: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync")
	initdb.Dir = dir // the caller's working directory may be closed to postgres
	initdb.SysProcAttr = sysProcAttr(cred)
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, bytes.TrimSpace(out))
	}
	// Another process may take the free port before the postmaster binds
	// it; then the postmaster exits at once and another port is tried.
	var lastErr error
	for range 3 {
		c, err := startPostmaster(ctx, bin, cred, dir, extra...)
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startPostmaster(ctx context.Context, bin string, cred *syscall.Credential, dir string, extra ...string) (*cluster, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return startPostmasterOn(ctx, bin, cred, dir, port, extra...)
}

// durableArgs make every acknowledged commit survive a crash of the server
// (not of the machine, as fsync stays off): fault experiments must not
// count the server's own losses as the application's.
var durableArgs = []string{"-c", "synchronous_commit=on"}

// startPostmasterOn starts a postmaster on the data directory of dir,
// listening on port, and waits until it accepts connections. The log is
// appended to, so that a restarted cluster keeps its earlier lines.
func startPostmasterOn(ctx context.Context, bin string, cred *syscall.Credential, dir string, port int, extra ...string) (*cluster, error) {
	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor

	cmd := exec.Command(filepath.Join(bin, "postgres"),
		"-D", filepath.Join(dir, "data"),
		"-k", dir,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=200",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
	)
	cmd.Args = append(cmd.Args, extra...) // a later -c wins
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr(cred)
	setParentDeathSignal(cmd.SysProcAttr, syscall.SIGQUIT)

	c := &cluster{
		dir:  dir,
		url:  fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		cmd:  cmd,
		done: make(chan struct{}),
	}
	// The parent death signal is sent when the thread that started the
	// child ends, not the process, so the child is started from a locked
	// thread that lives until the child has exited. The goroutine ends when
	// the postmaster exits, which stop brings about.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.err = cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if err := c.waitReady(ctx, logPath); err != nil {
		if stopErr := c.terminate(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	return c, nil
}

// waitReady polls until the server accepts a connection, the postmaster
// exits, or 30 seconds pass.
func (c *cluster) waitReady(ctx context.Context, logPath string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := ping(ctx, c.url)
		if err == nil {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("postgres exited (%v): %s", c.err, logTail(logPath))
		case <-ctx.Done():
			return fmt.Errorf("postgres not ready: %w: %s", err, logTail(logPath))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop shuts the postmaster down and removes the cluster's files.
func (c *cluster) stop() error {
	err := c.terminate()
	if rmErr := os.RemoveAll(c.dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("remove %s: %w", c.dir, rmErr))
	}
	return err
}

// terminate asks for a fast shutdown (SIGINT) and kills the postmaster if it
// has not exited within 15 seconds.
func (c *cluster) terminate() error {
	select {
	case <-c.done:
		return nil
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal postgres: %w", err)
	}
	select {
	case <-c.done:
		return nil
	case <-time.After(15 * time.Second):
	}
	if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill postgres: %w", err)
	}
	<-c.done
	return errors.New("postgres did not stop within 15s and was killed")
}

// binDir finds the directory of initdb and postgres: the highest major
// version under /usr/lib/postgresql, else what pg_config reports.
func binDir() (string, error) {
	matches, err := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if err == nil && len(matches) > 0 {
		major := func(p string) int {
			n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p)))) // a name that is no number sorts first
			return n
		}
		slices.SortFunc(matches, func(a, b string) int { return cmp.Compare(major(b), major(a)) })
		return filepath.Dir(matches[0]), nil
	}
	out, err := exec.Command("pg_config", "--bindir").Output()
	if err == nil {
		dir := strings.TrimSpace(string(out))
		if _, statErr := os.Stat(filepath.Join(dir, "initdb")); statErr == nil {
			return dir, nil
		}
	}
	return "", &unavailableError{reason: "no PostgreSQL binaries: none in /usr/lib/postgresql/*/bin and none from pg_config --bindir"}
}

// credential returns the postgres OS user to run the cluster as when this
// process is root, since initdb refuses to run as root; nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, &unavailableError{reason: fmt.Sprintf("running as root and no postgres OS user to run initdb as: %v", err)}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("uid of postgres %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("gid of postgres %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	return port, nil
}

// logTail returns the last lines of the server log, for error messages.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
