package consoletest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Process is a child process of a test: a console, a worker or an
// application, usually this test binary run again with -test.run naming
// the test that is the program.
type Process struct {
	Name string
	Cmd  *exec.Cmd
	// Base is what followed the ready prefix on the process's stdout: its
	// base URL.
	Base string
	// Out is its stdout, Errs its stderr (where the program logs).
	Out, Errs *SyncBuffer
	// Done is closed once the process has exited.
	Done chan struct{}
}

// TestBinary returns a command that runs this test binary's test named
// test, with env added to the test's environment.
func TestBinary(test string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// StartProcess starts cmd and returns once it prints a stdout line that
// starts with ready (its rest, trimmed, is Base); the test fails when the
// process exits before. When owner (t or a test t is a subtest of) ends,
// a process still running is stopped (SIGTERM, SIGKILL after 20 s) and,
// if owner failed, its output logged.
func StartProcess(t, owner *testing.T, name string, cmd *exec.Cmd, ready string) *Process {
	t.Helper()
	p := &Process{Name: name, Cmd: cmd, Out: &SyncBuffer{}, Errs: &SyncBuffer{}, Done: make(chan struct{})}
	cmd.Stderr = p.Errs
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(p.Done)
	}()
	owner.Cleanup(func() {
		select {
		case <-p.Done:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.Done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-p.Done
			}
		}
		if owner.Failed() {
			owner.Logf("%s (pid %d, %v) stdout:\n%s\n%s stderr:\n%s", name, cmd.Process.Pid, cmd.ProcessState, p.Out.String(), name, p.Errs.String())
		}
	})
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		fmt.Fprintln(p.Out, lines.Text())
		if base, ok := strings.CutPrefix(lines.Text(), ready); ok {
			p.Base = strings.TrimSpace(base)
			go func() { _, _ = io.Copy(p.Out, stdout) }()
			return p
		}
	}
	<-p.Done
	t.Fatalf("%s stopped before it was ready (%v):\n%s\n%s", name, cmd.ProcessState, p.Out.String(), p.Errs.String())
	return nil
}

// Kill kills the process with SIGKILL and waits for it to be gone.
func (p *Process) Kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGKILL))
	<-p.Done
	require.Equal(t, "signal: killed", p.Cmd.ProcessState.String())
}

// Stop stops the process with SIGTERM and requires a clean exit within
// 30 s.
func (p *Process) Stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.Done:
		require.True(t, p.Cmd.ProcessState.Success(), "%s exit: %v\n%s", p.Name, p.Cmd.ProcessState, p.Errs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop on SIGTERM:\n%s", p.Name, p.Errs.String())
	}
}
