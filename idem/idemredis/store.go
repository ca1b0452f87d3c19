package idemredis

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// DefaultPrefix is the prefix of every key the store writes unless
// [Config].Prefix sets another.
const DefaultPrefix = "unstuck:"

// DefaultExpiryGrace is how long after its retention ends a finished
// record is removed by Redis itself when no sweep removed it first (see
// [Config].ExpiryGrace).
const DefaultExpiryGrace = 24 * time.Hour

// ErrUnsupported is matched (errors.Is) by the error of [New] for a
// server or configuration the store cannot run on safely.
var ErrUnsupported = errors.New("idemredis: unsupported server or configuration")

// ErrNotDurable is matched (errors.Is), with [ErrUnsupported], by the
// error of [New] for a server whose persistence may lose acknowledged
// writes in a crash, or cannot be read (see New).
var ErrNotDurable = errors.New("acknowledged writes may not survive a crash of the server")

// Store is the Redis driver: an [idemdriver.Store], [idemdriver.Admin] and
// [idemdriver.Seeder] over a go-redis client. It is safe for concurrent
// use. It is not an [idemdriver.TxStore]: Redis has no transaction to
// share with the application's SQL writes.
type Store struct {
	c         redis.UniversalClient
	prefix    string
	cluster   bool
	grace     time.Duration // 0: no native expiry
	eviction  bool          // allow an evicting maxmemory-policy, with a warning
	risk      bool          // accept persistence that may lose acknowledged writes, with a warning
	asserted  bool          // the caller asserts durability New cannot check
	logger    *slog.Logger
	waitN     int
	waitT     time.Duration
	waitAOF   time.Duration // with waitAOFOn: WAITAOF 1 0 after every write
	waitAOFOn bool
	idxKeys   []string
	repairAge time.Duration
}

// Config configures a [Store] built by [New]. The zero value is the
// default of every field.
type Config struct {
	// Prefix is the prefix of every key the store writes. "" means
	// [DefaultPrefix]. It must not contain '{' or '}': the store adds hash
	// tags of its own after it.
	Prefix string
	// ExpiryGrace is how long after a finished record's retention
	// (Record.ExpiresAt) Redis removes it by itself, with PEXPIREAT, should
	// no Sweep have removed it first: a backstop that bounds memory when
	// no sweeper runs. 0 means [DefaultExpiryGrace]; a negative value
	// turns native expiry off (only Sweep removes records). Processing and
	// pending records never carry a native expiry: Sweep escalates an
	// abandoned record instead of removing it.
	ExpiryGrace time.Duration
	// EvictionAllowed lets [New] accept a maxmemory-policy other than
	// noeviction, logging a warning instead of refusing: Redis may then
	// drop a finished record under memory pressure, and a repeat of its
	// key runs again.
	EvictionAllowed bool
	// Logger is where start-up warnings go. Nil means slog.Default().
	Logger *slog.Logger
	// WaitReplicas makes every write wait, with WAIT, until WaitReplicas
	// replicas acknowledged it, or WaitTimeout passed (0: WAIT's own
	// meaning, no timeout); a write that reached fewer returns an error
	// (the write itself stands). With 0 a write is acknowledged once the
	// master applied it, and a failover may lose it: see the package
	// documentation. With WaitReplicas ≥ 1, [New] accepts a master whose
	// own persistence may lose acknowledged writes (AOF off, appendfsync
	// everysec): the copies on the replicas keep them, as long as a
	// crashed master is failed over to such a replica (Sentinel, Cluster)
	// rather than restarted from its own files, which its replicas would
	// then copy.
	WaitReplicas int
	WaitTimeout  time.Duration
	// WaitAOFTimeout, when not 0, makes every write that changed something
	// wait, with WAITAOF 1 0 WaitAOFTimeout, until the master has written
	// it to its AOF and fsynced it; a write not fsynced within the timeout
	// (1ms or more) returns an error (the write itself stands, and a crash
	// may lose it). [New] then accepts appendfsync everysec or no, and
	// refuses a server before Redis 7.2 (no WAITAOF) or with AOF off. The
	// cost is a round trip and the fsync's wait per write; a server with
	// appendfsync always needs no wait.
	WaitAOFTimeout time.Duration
	// AcceptDurabilityRisk makes [New] accept a server whose persistence
	// may lose acknowledged writes in a crash (AOF off, appendfsync other
	// than always, or settings New cannot read), logging a warning that
	// names the setting instead of refusing. What a crash of such a server
	// costs: a lost reservation lets a repeat of its key run again,
	// possibly while the first run still goes on, and return another
	// answer; a lost completion leaves its key processing until its lease
	// ends (then, by default, pending for an operator). Fences still never
	// repeat (see the package documentation). Measured in
	// TestCrashLosingWritesKeepsFences: every acknowledged key whose write
	// the crash lost ran again.
	AcceptDurabilityRisk bool
	// DurableServer asserts that the server keeps every acknowledged write
	// across a crash by means [New] cannot read: a managed service that
	// disables CONFIG but writes through a durable log, or appendfsync
	// always behind a renamed CONFIG. It applies only where New cannot
	// read the persistence settings; a setting New can read that loses
	// acknowledged writes is refused all the same. New logs the assertion
	// at Info.
	DurableServer bool
}

// New returns a store on c, after checking that the server can run it:
// Redis 6.2 or later, scripts run by EVALSHA (a proxy that refuses them is
// refused), a maxmemory-policy of noeviction (others are refused unless
// [Config].EvictionAllowed) and persistence that keeps acknowledged writes
// across a crash (see Durability below) on every master, and
// a client of the right kind (a *redis.ClusterClient for a cluster). The
// error of a refusal matches [ErrUnsupported] and says what to change.
// New makes a few round trips; call it once at start-up.
//
// Durability: New reads appendonly and appendfsync (CONFIG GET append*)
// and accepts appendonly yes with appendfsync always. Otherwise it
// refuses, naming the setting, unless the store waits for durability per
// write (Config.WaitAOFTimeout; Config.WaitReplicas ≥ 1) or the caller
// accepts the risk (Config.AcceptDurabilityRisk, logged as a warning). Where
// CONFIG GET is refused (renamed or denied, as on managed services) New
// refuses too, saying the check could not be made, unless a per-write
// wait, Config.DurableServer or Config.AcceptDurabilityRisk is set; INFO's
// aof_enabled:0 still counts as AOF off.
func New(ctx context.Context, c redis.UniversalClient, cfg Config) (*Store, error) {
	s := &Store{c: c, prefix: cmp.Or(cfg.Prefix, DefaultPrefix), grace: max(cmp.Or(cfg.ExpiryGrace, DefaultExpiryGrace), 0),
		eviction: cfg.EvictionAllowed, risk: cfg.AcceptDurabilityRisk, asserted: cfg.DurableServer, logger: cfg.Logger,
		waitN: cfg.WaitReplicas, waitT: cfg.WaitTimeout, waitAOF: cfg.WaitAOFTimeout, waitAOFOn: cfg.WaitAOFTimeout != 0,
		repairAge: 10 * time.Second}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if strings.ContainsAny(s.prefix, "{}") {
		return nil, fmt.Errorf("idemredis: prefix %q: must not contain '{' or '}'", s.prefix)
	}
	_, s.cluster = c.(*redis.ClusterClient)
	tag := s.prefix + "{" + s.prefix + "idx}:"
	s.idxKeys = []string{tag + "n", tag + "k", tag + "v", tag + "u", tag + "l", tag + "e"}
	for _, st := range idemdriver.Statuses {
		s.idxKeys = append(s.idxKeys, tag+"u:"+string(st))
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// check is the start-up check of New.
func (s *Store) check(ctx context.Context) error {
	each := func(fn func(ctx context.Context, c *redis.Client) error) error {
		switch c := s.c.(type) {
		case *redis.ClusterClient:
			return c.ForEachMaster(ctx, fn)
		case *redis.Client:
			return fn(ctx, c)
		default:
			return fmt.Errorf("%w: client %T: use a *redis.Client or *redis.ClusterClient", ErrUnsupported, s.c)
		}
	}
	if s.waitAOFOn && s.waitAOF < time.Millisecond {
		return fmt.Errorf("idemredis: Config.WaitAOFTimeout %s: the timeout must be 1ms or more", s.waitAOF)
	}
	return each(func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx).Result()
		if err != nil {
			return fmt.Errorf("idemredis: INFO on %s: %w", c.Options().Addr, err)
		}
		fields := parseInfo(info)
		if v := fields["redis_version"]; !atLeast(v, 6, 2) {
			return fmt.Errorf("%w: %s runs Redis %q; the store needs 6.2 or later", ErrUnsupported, c.Options().Addr, v)
		}
		if fields["cluster_enabled"] == "1" && !s.cluster {
			return fmt.Errorf("%w: %s is a cluster node: connect with redis.NewClusterClient", ErrUnsupported, c.Options().Addr)
		}
		if p := fields["maxmemory_policy"]; p != "" && p != "noeviction" {
			msg := fmt.Sprintf("%s has maxmemory-policy %s: Redis may evict idempotency records under memory pressure, and a repeat of an evicted key runs again; set maxmemory-policy noeviction", c.Options().Addr, p)
			if !s.eviction {
				return fmt.Errorf("%w: %s (or set idemredis.Config.EvictionAllowed to accept it)", ErrUnsupported, msg)
			}
			s.logger.Warn("idemredis: " + msg)
		}
		if err := s.checkDurability(ctx, c, fields); err != nil {
			return err
		}
		probe := redis.NewScript(`return ARGV[1]`)
		if err := probe.Load(ctx, c).Err(); err != nil {
			return fmt.Errorf("%w: SCRIPT LOAD on %s: %v: the store runs every primitive as one Lua script", ErrUnsupported, c.Options().Addr, err)
		}
		got, err := probe.EvalSha(ctx, c, nil, "ok").Text()
		if err != nil || got != "ok" {
			return fmt.Errorf("%w: EVALSHA on %s: %v (reply %q): the store needs scripts run atomically by EVALSHA", ErrUnsupported, c.Options().Addr, err, got)
		}
		return nil
	})
}

// checkDurability is the persistence check of New on one master (see
// New): nil when an acknowledged write survives a crash of the server, or
// the store waits for durability per write, or the caller accepted the
// risk (logged); else an error naming the setting and the fields that accept it.
func (s *Store) checkDurability(ctx context.Context, c *redis.Client, info map[string]string) error {
	addr := c.Options().Addr
	cfg, cfgErr := c.ConfigGet(ctx, "append*").Result()
	aof, fsync := cfg["appendonly"], cfg["appendfsync"]
	if cfgErr == nil && (aof == "" || fsync == "") {
		cfgErr = errors.New("no appendonly or appendfsync in its reply")
	}
	if cfgErr != nil {
		aof, fsync = "", ""
		if info["aof_enabled"] == "0" {
			aof = "no" // INFO persistence answers where CONFIG is refused
		}
	}
	const options = "set idemredis.Config.WaitAOFTimeout (Redis 7.2+, AOF on) or idemredis.Config.WaitReplicas (replicas) to wait for durability per write, " +
		"or idemredis.Config.AcceptDurabilityRisk to accept losing acknowledged writes on a crash"
	var problem, fix string
	switch {
	case aof == "no":
		problem, fix = "appendonly is no: a crash of the server loses every write since its last snapshot, acknowledged ones included", "set appendonly yes and appendfsync always, or "+options
	case aof == "yes" && fsync != "always":
		problem, fix = fmt.Sprintf("appendfsync is %s: a crash of the server can lose the writes of the last second or more, acknowledged ones included", fsync), "set appendfsync always, or "+options
	case cfgErr != nil:
		problem = fmt.Sprintf("its persistence settings could not be read (CONFIG GET append*: %v), so the store cannot check that an acknowledged write survives a crash", cfgErr)
		fix = options + ", or idemredis.Config.DurableServer if the service keeps every acknowledged write by itself"
	}
	switch {
	case problem == "":
		return nil
	case s.waitAOFOn:
		if v := info["redis_version"]; !atLeast(v, 7, 2) {
			return fmt.Errorf("%w: %w: %s runs Redis %q: Config.WaitAOFTimeout needs WAITAOF, Redis 7.2 or later (%s)", ErrUnsupported, ErrNotDurable, addr, v, problem)
		}
		if aof == "no" {
			return fmt.Errorf("%w: %w: %s has appendonly no: Config.WaitAOFTimeout waits for the AOF; set appendonly yes", ErrUnsupported, ErrNotDurable, addr)
		}
		return nil
	case s.waitN > 0:
		return nil
	case s.asserted && cfgErr != nil && aof != "no":
		s.logger.Info("idemredis: persistence not checked: Config.DurableServer asserts that the server keeps acknowledged writes across a crash",
			"addr", addr, "reason", cfgErr.Error())
		return nil
	case s.risk:
		s.logger.Warn("idemredis: "+addr+": "+problem+"; accepted by Config.AcceptDurabilityRisk: after such a crash a key whose reservation was lost "+
			"runs again on its next request (and may answer differently), and a key whose completion was lost stays processing until its lease ends. Fences never repeat.",
			"addr", addr)
		return nil
	}
	return fmt.Errorf("%w: %w: %s: %s; %s", ErrUnsupported, ErrNotDurable, addr, problem, fix)
}

// parseInfo parses the text of INFO into its fields.
func parseInfo(s string) map[string]string {
	out := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}

// atLeast reports whether version v is at least major.minor.
func atLeast(v string, major, minor int) bool {
	parts := strings.Split(v, ".")
	if len(parts) < 2 {
		return false
	}
	a, err1 := strconv.Atoi(parts[0])
	b, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return a > major || (a == major && b >= minor)
}

// Prefix returns the prefix of the store's keys.
func (s *Store) Prefix() string { return s.prefix }

// Cluster reports whether the store runs on a Redis Cluster, where a write
// and its index change are two steps (see the package documentation).
func (s *Store) Cluster() bool { return s.cluster }

// recordKey is the key of the record of id: the prefix and a hash tag of
// the ident's SHA-256, so that every key of one record is in one slot.
func (s *Store) recordKey(id idemdriver.Ident) string {
	h := sha256.New()
	for _, part := range []string{id.Scope, id.Operation, id.KeyDigest} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return s.prefix + "{" + hex.EncodeToString(h.Sum(nil)[:16]) + "}"
}

// run runs the record script sc on rk with args, and its index change:
// in the same script on a single server, as a second script on the index
// slot on a cluster. It returns the script's answer.
func (s *Store) run(ctx context.Context, sc scriptPair, rk string, args ...any) ([]any, error) {
	if !s.cluster {
		res, err := s.eval(ctx, sc.single, append([]string{rk}, s.idxKeys...), args...)
		if err != nil {
			return nil, err
		}
		out, ok := res.([]any)
		if !ok {
			return nil, fmt.Errorf("unexpected script reply %T", res)
		}
		return out, nil
	}
	res, err := s.eval(ctx, sc.cluster, []string{rk}, args...)
	if err != nil {
		return nil, err
	}
	pair, ok := res.([]any)
	if !ok || len(pair) < 1 {
		return nil, fmt.Errorf("unexpected script reply %v", res)
	}
	out, ok := pair[0].([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected script reply %v", res)
	}
	if len(pair) > 1 && pair[1] != nil {
		chg, _ := pair[1].([]any)
		if err := s.index(ctx, chg...); err != nil {
			return nil, fmt.Errorf("index: %w (the record is written; a read repairs its index entry)", err)
		}
	}
	return out, nil
}

// index applies one index change on a cluster.
func (s *Store) index(ctx context.Context, chg ...any) error {
	_, err := s.eval(ctx, scriptIndex, s.idxKeys, chg...)
	return err
}

// eval runs sc by EVALSHA (loading it on NOSCRIPT). When the store was
// built with Config.WaitAOFTimeout or WaitReplicas, a script that wrote is followed by
// WAITAOF, then WAIT, on the same connection; one that changed nothing is
// not waited for.
func (s *Store) eval(ctx context.Context, sc *redis.Script, keys []string, args ...any) (any, error) {
	if s.waitN <= 0 && !s.waitAOFOn {
		return sc.Run(ctx, s.c, keys, args...).Result()
	}
	var node *redis.Client
	switch c := s.c.(type) {
	case *redis.ClusterClient:
		m, err := c.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		node = m
	case *redis.Client:
		node = c
	default:
		return nil, fmt.Errorf("%w: Config.WaitReplicas and WaitAOFTimeout need a *redis.Client or *redis.ClusterClient, not %T", ErrUnsupported, s.c)
	}
	conn := node.Conn()
	defer conn.Close()
	res, err := sc.Run(ctx, conn, keys, args...).Result()
	if err != nil {
		var rerr redis.Error
		if cc, ok := s.c.(*redis.ClusterClient); ok && !errors.As(err, &rerr) {
			// The node is unreachable (a failover?): the cluster
			// client, which routed nothing here, learns the new map.
			cc.ReloadState(ctx)
		}
		return nil, err
	}
	if !wrote(res) {
		return res, nil
	}
	if s.waitAOFOn {
		n, err := conn.WaitAOF(ctx, 1, 0, s.waitAOF).Result()
		if err != nil || len(n) < 1 || n[0] < 1 {
			return nil, fmt.Errorf("WAITAOF: the write was not fsynced to the AOF within %s (%v); it stands in memory and a crash may lose it", s.waitAOF, err)
		}
	}
	if s.waitN <= 0 {
		return res, nil
	}
	if n, err := conn.Wait(ctx, s.waitN, s.waitT).Result(); err != nil || n < int64(s.waitN) {
		return nil, fmt.Errorf("WAIT: %d of %d replicas acknowledged the write within %s (%v); it stands on the master and may be lost in a failover", n, s.waitN, s.waitT, err)
	}
	return res, nil
}

// wrote reports whether a script's reply may follow a write: not for an
// answer that found nothing to change (code 0, a refusal or an existing
// record; 2, a request for a fence; 3, an existing record read lean),
// whose WAIT result is moot.
func wrote(v any) bool {
	out, _ := v.([]any)
	if len(out) > 0 {
		if inner, ok := out[0].([]any); ok {
			out = inner
		}
	}
	if len(out) > 0 {
		if n, ok := out[0].(int64); ok && (n == 0 || n == 2 || n == 3) {
			return false
		}
		if _, ok := out[0].(string); ok {
			return false // Get: {now, fields}
		}
	}
	return true
}

// now returns the µs argument of a script for a params' Now: "" for the
// server's clock.
func nowArg(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMicro(), 10)
}

func us(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

func (s *Store) graceArg() string {
	if s.grace <= 0 {
		return ""
	}
	return us(s.grace)
}

// checkIdent refuses an ident with an empty part, as the SQL stores'
// constraints do.
func checkIdent(id idemdriver.Ident) error {
	switch {
	case id.Scope == "":
		return errors.New("empty scope")
	case id.Operation == "":
		return errors.New("empty operation")
	case id.KeyDigest == "":
		return errors.New("empty key digest")
	}
	return nil
}

func wrap(op string, err error) error {
	if errors.Is(err, idemdriver.ErrFenced) || errors.Is(err, idemdriver.ErrStale) {
		return fmt.Errorf("idemredis: %s: %w", op, err)
	}
	return fmt.Errorf("idemredis: %s: %w", op, err)
}

// Reserve implements [idemdriver.Store.Reserve] in one script: it returns
// the existing record, or creates it with the next fence (its ID is that
// fence). On a cluster a creation takes the fence from the counter first,
// a second round trip, and the index change a third (see the package
// documentation). With p.Lean an existing record is read with its
// idemdriver.LeanFields only (one HMGET).
func (s *Store) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	if err := checkIdent(p.Ident); err != nil {
		return idemdriver.Record{}, false, wrap("reserve", err)
	}
	rk := s.recordKey(p.Ident)
	fence, lean := "", "0"
	if p.Lean {
		lean = "1"
	}
	for {
		out, err := s.run(ctx, scriptReserve, rk, nowArg(p.Now), us(p.Lease), us(p.TTL),
			p.Scope, p.Operation, p.KeyDigest, p.KeyHash, p.Fingerprint, p.Owner, fence, lean, p.TraceID)
		if err != nil {
			return idemdriver.Record{}, false, wrap("reserve", err)
		}
		switch code(out) {
		case 3:
			rec, err := decodeLean(p.Ident, out[2], out[1])
			if err != nil {
				return idemdriver.Record{}, false, wrap("reserve", err)
			}
			return rec, false, nil
		case 0:
			rec, err := decodeAt(out[2], out[1])
			if err != nil {
				return idemdriver.Record{}, false, wrap("reserve", err)
			}
			return rec, false, nil
		case 2:
			if fence != "" {
				return idemdriver.Record{}, false, wrap("reserve", errors.New("the script asked for a fence twice"))
			}
			if fence, err = s.nextFence(ctx); err != nil {
				return idemdriver.Record{}, false, wrap("reserve: next fence", err)
			}
			continue
		}
		at, id := micros(str(out[1])), atoi(str(out[2]))
		return idemdriver.Record{ID: id, Ident: p.Ident, KeyHash: p.KeyHash, TraceID: p.TraceID, Fingerprint: p.Fingerprint,
			Status: idemdriver.StatusProcessing, Owner: idemdriver.Owner{Token: p.Owner, Fence: id},
			LeaseExpiresAt: at.Add(trunc(p.Lease)), Attempts: 1, Version: 1, CreatedAt: at, UpdatedAt: at,
			ExpiresAt: at.Add(trunc(max(p.TTL, p.Lease))), ReadAt: at}, true, nil
	}
}

// nextFence takes the next fence from the counter in a round trip of its
// own (see luaNextFence). It is not waited for (Config.WaitReplicas, WaitAOFTimeout):
// should a crash lose the counter's write, the next fence is higher all
// the same.
func (s *Store) nextFence(ctx context.Context) (string, error) {
	return scriptFence.Run(ctx, s.c, s.idxKeys[ixCounter:ixCounter+1]).Text()
}

// trunc truncates d to the microseconds the store keeps.
func trunc(d time.Duration) time.Duration { return d.Truncate(time.Microsecond) }

// Takeover implements [idemdriver.Store.Takeover] in one script. On a
// cluster a takeover that passes the check takes its fence from the
// counter and runs the script again, so a takeover lost to a concurrent
// one burns a fence.
func (s *Store) Takeover(ctx context.Context, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	rk := s.recordKey(p.Ident)
	fresh := "0"
	if p.Fresh {
		fresh = "1"
	}
	fence := ""
	for {
		out, err := s.run(ctx, scriptTakeover, rk, nowArg(p.Now), p.Seen.Token, strconv.FormatInt(p.Seen.Fence, 10),
			p.NewOwner, us(p.Lease), fresh, p.Fingerprint, us(p.TTL), fence, p.TraceID)
		if err != nil {
			return idemdriver.Record{}, wrap("takeover", err)
		}
		switch code(out) {
		case 0:
			return idemdriver.Record{}, wrap("takeover", idemdriver.ErrFenced)
		case 2:
			if fence != "" {
				return idemdriver.Record{}, wrap("takeover", errors.New("the script asked for a fence twice"))
			}
			if fence, err = s.nextFence(ctx); err != nil {
				return idemdriver.Record{}, wrap("takeover: next fence", err)
			}
			continue
		}
		rec, err := decodeAt(out[2], out[1])
		if err != nil {
			return idemdriver.Record{}, wrap("takeover", err)
		}
		return rec, nil
	}
}

// Complete implements [idemdriver.Store.Complete]. A completed, failed or
// unavailable record gets a native expiry at ExpiresAt plus the expiry
// grace (see [Config].ExpiryGrace).
func (s *Store) Complete(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	if !c.Status.Valid() || c.Status == idemdriver.StatusProcessing {
		return wrap("complete", fmt.Errorf("status %q is not a final status", c.Status))
	}
	has := "0"
	if c.Result != nil {
		has = "1"
	}
	out, err := s.run(ctx, scriptComplete, s.recordKey(id), nowArg(c.Now), o.Token, strconv.FormatInt(o.Fence, 10),
		string(c.Status), has, c.Result, strconv.Itoa(c.ResponseCode), c.LastError, s.graceArg())
	return casErr("complete", out, err, idemdriver.ErrFenced)
}

// Annotate implements [idemdriver.Store.Annotate].
func (s *Store) Annotate(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, a idemdriver.Annotation) error {
	ids := []byte("[]")
	if len(a.ResourceIDs) > 0 {
		var err error
		if ids, err = json.Marshal(a.ResourceIDs); err != nil {
			return wrap("annotate", err)
		}
	}
	out, err := s.run(ctx, scriptAnnotate, s.recordKey(id), nowArg(a.Now), o.Token, strconv.FormatInt(o.Fence, 10),
		a.CorrelationID, a.ExternalRef, string(ids))
	return casErr("annotate", out, err, idemdriver.ErrFenced)
}

// Release implements [idemdriver.Store.Release].
func (s *Store) Release(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner) error {
	out, err := s.run(ctx, scriptRelease, s.recordKey(id), o.Token, strconv.FormatInt(o.Fence, 10))
	return casErr("release", out, err, idemdriver.ErrFenced)
}

// Extend implements [idemdriver.Store.Extend].
func (s *Store) Extend(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, lease time.Duration, now time.Time) (time.Time, error) {
	out, err := s.run(ctx, scriptExtend, s.recordKey(id), nowArg(now), o.Token, strconv.FormatInt(o.Fence, 10), us(lease))
	if err := casErr("extend", out, err, idemdriver.ErrFenced); err != nil {
		return time.Time{}, err
	}
	return micros(str(out[1])), nil
}

// Get implements [idemdriver.Store.Get]; ReadAt is the server's clock.
func (s *Store) Get(ctx context.Context, id idemdriver.Ident) (idemdriver.Record, bool, error) {
	out, err := s.run(ctx, scriptGet, s.recordKey(id), "")
	if err != nil {
		return idemdriver.Record{}, false, wrap("get", err)
	}
	if fields, _ := out[1].([]any); len(fields) == 0 {
		return idemdriver.Record{}, false, nil
	}
	rec, err := decodeAt(out[1], out[0])
	if err != nil {
		return idemdriver.Record{}, false, wrap("get", err)
	}
	return rec, true, nil
}

// Delete implements [idemdriver.Store.Delete].
func (s *Store) Delete(ctx context.Context, id idemdriver.Ident) (bool, error) {
	out, err := s.run(ctx, scriptDelete, s.recordKey(id))
	if err != nil {
		return false, wrap("delete", err)
	}
	return code(out) == 1, nil
}

// Settle implements [idemdriver.Store.Settle].
func (s *Store) Settle(ctx context.Context, id idemdriver.Ident, st idemdriver.Settlement) (idemdriver.Record, bool, error) {
	del := "0"
	if st.Delete {
		del = "1"
	} else if !st.Status.Terminal() {
		return idemdriver.Record{}, false, wrap("settle", fmt.Errorf("status %q is not a terminal status", st.Status))
	}
	out, err := s.run(ctx, scriptSettle, s.recordKey(id), nowArg(st.Now), strconv.FormatInt(st.Version, 10), del,
		string(st.Status), st.ExternalRef, st.LastError, s.graceArg())
	if err := casErr("settle", out, err, idemdriver.ErrStale); err != nil {
		if errors.Is(err, idemdriver.ErrStale) {
			return idemdriver.Record{}, false, idemdriver.ErrStale
		}
		return idemdriver.Record{}, false, err
	}
	if st.Delete {
		return idemdriver.Record{}, false, nil
	}
	rec, err := decodeAt(out[2], out[1])
	if err != nil {
		return idemdriver.Record{}, false, wrap("settle", err)
	}
	return rec, true, nil
}

// casErr turns the answer of a compare-and-swap script into an error:
// refused when its code is 0.
func casErr(op string, out []any, err error, refused error) error {
	if err != nil {
		return wrap(op, err)
	}
	if code(out) != 1 {
		return wrap(op, refused)
	}
	return nil
}

func code(out []any) int64 {
	if len(out) == 0 {
		return -1
	}
	n, _ := out[0].(int64)
	return n
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// micros parses stored Unix microseconds into a UTC time.
func micros(s string) time.Time { return time.UnixMicro(atoi(s)).UTC() }

// decodeAt decodes the HGETALL reply fields of a record, read at the µs
// time readAt.
func decodeAt(fields, readAt any) (idemdriver.Record, error) {
	list, _ := fields.([]any)
	m := make(map[string]string, len(list)/2)
	for i := 0; i+1 < len(list); i += 2 {
		m[str(list[i])] = str(list[i+1])
	}
	return decodeMap(m, micros(str(readAt)))
}

// decodeLean decodes the lean values of an existing record of ident id
// (id, fp, st, res, tok, fen, lease, ca, ea; nil when absent), read at
// the µs time readAt.
func decodeLean(id idemdriver.Ident, vals, readAt any) (idemdriver.Record, error) {
	v, _ := vals.([]any)
	if len(v) != 9 {
		return idemdriver.Record{}, fmt.Errorf("lean record: %d values, want 9", len(v))
	}
	rec := idemdriver.Record{ID: atoi(str(v[0])), Ident: id, Fingerprint: str(v[1]), Status: idemdriver.Status(str(v[2])),
		Owner: idemdriver.Owner{Token: str(v[4]), Fence: atoi(str(v[5]))}, CreatedAt: micros(str(v[7])), ExpiresAt: micros(str(v[8])),
		ReadAt: micros(str(readAt))}
	if !rec.Status.Valid() {
		return idemdriver.Record{}, fmt.Errorf("record %d: unknown status %q", rec.ID, str(v[2]))
	}
	if r, ok := v[3].(string); ok {
		rec.Result = []byte(r)
	}
	if l, ok := v[6].(string); ok {
		rec.LeaseExpiresAt = micros(l)
	}
	return rec, nil
}

// decodeMap decodes a record's hash.
func decodeMap(m map[string]string, readAt time.Time) (idemdriver.Record, error) {
	rec := idemdriver.Record{ID: atoi(m["id"]), Ident: idemdriver.Ident{Scope: m["s"], Operation: m["o"], KeyDigest: m["d"]},
		KeyHash: m["kh"], TraceID: m["tr"], Fingerprint: m["fp"], Status: idemdriver.Status(m["st"]), ResponseCode: int(atoi(m["rc"])),
		CorrelationID: m["cid"], ExternalRef: m["ext"], LastError: m["err"],
		Owner:    idemdriver.Owner{Token: m["tok"], Fence: atoi(m["fen"])},
		Attempts: int(atoi(m["att"])), Version: atoi(m["ver"]),
		CreatedAt: micros(m["ca"]), UpdatedAt: micros(m["ua"]), ExpiresAt: micros(m["ea"]), ReadAt: readAt}
	if !rec.Status.Valid() {
		return idemdriver.Record{}, fmt.Errorf("record %d: unknown status %q", rec.ID, m["st"])
	}
	if r, ok := m["res"]; ok {
		rec.Result = []byte(r)
	}
	if l, ok := m["lease"]; ok {
		rec.LeaseExpiresAt = micros(l)
	}
	if ids := m["rids"]; ids != "" && ids != "[]" {
		if err := json.Unmarshal([]byte(ids), &rec.ResourceIDs); err != nil || rec.ResourceIDs == nil {
			return idemdriver.Record{}, fmt.Errorf("record %d: resource ids are not a JSON array: %v", rec.ID, err)
		}
	}
	return rec, nil
}
