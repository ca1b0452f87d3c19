// Package redistest starts throwaway Redis servers and clusters for tests,
// from the redis-server and redis-cli binaries on PATH: a single server on
// a free port in [7100, 7200) and a cluster of masters (and replicas) on
// free ports in [7200, 7300), each in a temporary directory. Every node
// runs with AOF on and appendfsync always (no RDB snapshots): the
// persistence idemredis.New requires of a server without a per-write
// wait; a test passes other settings as extra arguments of [StartServer].
// Nothing is mocked.
//
// One server and one cluster are started per test process, on first use,
// and shared by its tests, which keep apart by key prefix; call [RunMain]
// from TestMain so that they are stopped at the end:
//
//	func TestMain(m *testing.M) { redistest.RunMain(m) }
//
// Without the binaries a test is skipped, or failed when CI is "true".
//
// It is test support for this repository's suites, public so that the
// library's tests, the console's and the tools share it; adopters may use
// it, with no compatibility promise before v1.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Node is one redis-server process started by this package.
type Node struct {
	Addr string // host:port
	Port int
	dir  string
	args []string // redis-server's arguments, for Restart
	cmd  *exec.Cmd
	done chan struct{}
}

// Kill sends SIGKILL to the node and waits for it to exit (a crash, as in
// a failover test). Killing a node that is not running does nothing.
func (n *Node) Kill() {
	if n.cmd.Process != nil {
		_ = n.cmd.Process.Kill()
	}
	<-n.done
}

// Pid returns the process ID of the node's running redis-server.
func (n *Node) Pid() int { return n.cmd.Process.Pid }

// Dir returns the node's data directory: its AOF (appendonlydir/), and
// its log (log).
func (n *Node) Dir() string { return n.dir }

// Restart starts a killed node again with the same arguments, port and
// data directory, so that it loads what it had persisted, and waits until
// it answers PING (after loading). It fails t when the node does not come
// back within 30 s.
func (n *Node) Restart(t testing.TB) {
	t.Helper()
	n.Kill()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		if err := n.start(); err != nil {
			t.Fatalf("redistest: restart %s: %v", n.Addr, err)
		}
		err := waitFor(ctx, n, "PING", "PONG")
		if err == nil {
			return
		}
		n.Kill()
		// The port may still be held for a moment by the killed process's
		// sockets: try again until the deadline.
		if ctx.Err() != nil {
			t.Fatalf("redistest: restart %s: %v (log in %s)", n.Addr, err, n.dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// start runs redis-server with n's arguments.
func (n *Node) start() error {
	cmd := exec.Command("redis-server", n.args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.cmd, n.done = cmd, done
	return nil
}

// Cluster is a Redis Cluster started by this package.
type Cluster struct {
	Masters  []*Node
	Replicas []*Node
}

// Addrs returns the addresses of every node, masters first: the seed list
// of a cluster client.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range append(append([]*Node{}, c.Masters...), c.Replicas...) {
		out = append(out, n.Addr)
	}
	return out
}

var process struct {
	mu        sync.Mutex
	nodes     []*Node
	single    *Node
	singleE   error
	cluster   *Cluster
	clusterE  error
	volatile  *Node
	volatileE error
	vcluster  *Cluster
	vclusterE error
}

// volatileArgs turn persistence off: see VolatileServer.
var volatileArgs = []string{"--appendonly", "no"}

// RunMain runs the tests of m, then kills every node started and removes
// their directories. Nodes are started to receive SIGKILL should the test
// binary die first.
func RunMain(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop kills every node this package started and removes their
// directories: for a TestMain that has its own RunMain to call.
func Stop() {
	process.mu.Lock()
	for _, n := range process.nodes {
		n.Kill()
		_ = os.RemoveAll(n.dir)
	}
	process.nodes = nil
	process.mu.Unlock()
}

// Server returns the address of this process's throwaway single server,
// starting it on first use. It skips t, or fails it under CI=true, when
// redis-server is missing.
func Server(t testing.TB) string {
	t.Helper()
	process.mu.Lock()
	defer process.mu.Unlock()
	if process.single == nil && process.singleE == nil {
		if err := binaries(); err != nil {
			unavailable(t, err)
		}
		process.single, process.singleE = startNode(t.Context(), 7100, 7200, false)
	}
	if process.singleE != nil {
		t.Fatalf("redistest: %v", process.singleE)
	}
	return process.single.Addr
}

// VolatileServer returns the address of this process's throwaway single
// server without persistence (appendonly no), starting it on first use:
// for benchmarks, which measure the client's work and whose documented
// setup has no persistence. idemredis.New accepts it only with
// Config.AcceptDurabilityRisk.
func VolatileServer(t testing.TB) string {
	t.Helper()
	process.mu.Lock()
	defer process.mu.Unlock()
	if process.volatile == nil && process.volatileE == nil {
		if err := binaries(); err != nil {
			unavailable(t, err)
		}
		process.volatile, process.volatileE = startNode(context.Background(), 7100, 7200, false, volatileArgs...)
	}
	if process.volatileE != nil {
		t.Fatalf("redistest: %v", process.volatileE)
	}
	return process.volatile.Addr
}

// VolatileCluster is SharedCluster without persistence (see
// VolatileServer).
func VolatileCluster(t testing.TB) *Cluster {
	t.Helper()
	process.mu.Lock()
	defer process.mu.Unlock()
	if process.vcluster == nil && process.vclusterE == nil {
		if err := binaries(); err != nil {
			unavailable(t, err)
		}
		process.vcluster, process.vclusterE = startCluster(context.Background(), 3, 0, volatileArgs...)
	}
	if process.vclusterE != nil {
		t.Fatalf("redistest: %v", process.vclusterE)
	}
	return process.vcluster
}

// StartServer starts a single server of t's own with extra configuration
// arguments (e.g. "--maxmemory-policy", "allkeys-lru"), killed at t's end.
func StartServer(t testing.TB, args ...string) *Node {
	t.Helper()
	if err := binaries(); err != nil {
		unavailable(t, err)
	}
	process.mu.Lock()
	defer process.mu.Unlock()
	n, err := startNode(context.Background(), 7100, 7200, false, args...)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(n.Kill)
	return n
}

// SharedCluster returns this process's throwaway cluster of 3 masters
// without replicas, starting it on first use.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	process.mu.Lock()
	defer process.mu.Unlock()
	if process.cluster == nil && process.clusterE == nil {
		if err := binaries(); err != nil {
			unavailable(t, err)
		}
		process.cluster, process.clusterE = startCluster(context.Background(), 3, 0)
	}
	if process.clusterE != nil {
		t.Fatalf("redistest: %v", process.clusterE)
	}
	return process.cluster
}

// StartCluster starts a cluster of t's own, masters masters with replicas
// replicas each, killed at t's end.
func StartCluster(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	if err := binaries(); err != nil {
		unavailable(t, err)
	}
	process.mu.Lock()
	defer process.mu.Unlock()
	c, err := startCluster(context.Background(), masters, replicas)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() {
		for _, n := range append(append([]*Node{}, c.Masters...), c.Replicas...) {
			n.Kill()
		}
	})
	return c
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("redistest: %v (CI=true: Redis is required)", err)
	}
	t.Skipf("redistest: %v", err)
}

func binaries() error {
	for _, b := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s not found on PATH: %w", b, err)
		}
	}
	return nil
}

// startCluster starts masters+masters*replicas nodes in cluster mode,
// joins them with redis-cli --cluster create and waits until every node
// reports cluster_state:ok. extra are more arguments of every node. Call
// with process.mu held.
func startCluster(ctx context.Context, masters, replicas int, extra ...string) (*Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var nodes []*Node
	for range masters * (1 + replicas) {
		n, err := startNode(ctx, 7200, 7300, true, extra...)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	args := []string{"--cluster", "create"}
	for _, n := range nodes {
		args = append(args, n.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("redis-cli --cluster create: %w: %s", err, out)
	}
	for _, n := range nodes {
		if err := waitFor(ctx, n, "CLUSTER INFO", "cluster_state:ok"); err != nil {
			return nil, err
		}
	}
	c := &Cluster{}
	for _, n := range nodes {
		out, err := cli(ctx, n, "ROLE")
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(out, "master") {
			c.Masters = append(c.Masters, n)
			continue
		}
		if err := waitFor(ctx, n, "INFO replication", "master_link_status:up"); err != nil {
			return nil, err
		}
		c.Replicas = append(c.Replicas, n)
	}
	return c, nil
}

// startNode starts redis-server on a free port in [lo, hi) (and, for a
// cluster node, its bus port +10000 free too) in a new temporary directory
// and waits until it answers PING. Call with process.mu held.
func startNode(ctx context.Context, lo, hi int, cluster bool, extra ...string) (*Node, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 20 {
		port := lo + rand.IntN(hi-lo)
		if !free(port) || (cluster && !free(port+10000)) {
			continue
		}
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "yes", "--appendfsync", "always",
			"--protected-mode", "no", "--logfile", filepath.Join(dir, "log")}
		if cluster {
			args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "2000")
		}
		args = append(args, extra...)
		n := &Node{Addr: fmt.Sprintf("127.0.0.1:%d", port), Port: port, dir: dir, args: args}
		if err := n.start(); err != nil {
			return nil, err
		}
		process.nodes = append(process.nodes, n)
		if lastErr = waitFor(ctx, n, "PING", "PONG"); lastErr == nil {
			return n, nil
		}
		n.Kill()
	}
	return nil, fmt.Errorf("no redis-server started on a free port in [%d, %d): %v (log in %s)", lo, hi, lastErr, dir)
}

func free(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// waitFor polls n with command until its reply contains want, every 20 ms.
func waitFor(ctx context.Context, n *Node, command, want string) error {
	for {
		select {
		case <-n.done:
			return fmt.Errorf("redis-server on %s exited", n.Addr)
		default:
		}
		if out, err := cli(ctx, n, strings.Fields(command)...); err == nil && strings.Contains(out, want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s on %s: no %q: %w", command, n.Addr, want, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// cli runs one command on n with a minimal RESP client, returning the
// reply's text (bulk strings and arrays flattened by lines).
func cli(ctx context.Context, n *Node, args ...string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", n.Addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(conn))
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		size, _ := strconv.Atoi(line[1:])
		if size < 0 {
			return "", nil
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:size]), nil
	case '*':
		count, _ := strconv.Atoi(line[1:])
		var parts []string
		for range count {
			p, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// WaitFailover waits until every live node of c sees killed as failed
// and reports cluster_state:ok again: a replica of killed was promoted.
func (c *Cluster) WaitFailover(t testing.TB, killed *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, n := range append(append([]*Node{}, c.Masters...), c.Replicas...) {
		if n == killed {
			continue
		}
		if err := waitFor(ctx, n, "CLUSTER NODES", fmt.Sprintf("127.0.0.1:%d@%d master,fail", killed.Port, killed.Port+10000)); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		if err := waitFor(ctx, n, "CLUSTER INFO", "cluster_state:ok"); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		for {
			out, err := cli(ctx, n, "CLUSTER", "SLOTS")
			if err == nil && !slices.Contains(strings.Split(out, "\n"), strconv.Itoa(killed.Port)) {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("redistest: CLUSTER SLOTS of %s still names %s", n.Addr, killed.Addr)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}
