package consolecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/unstuckhq/unstuck/idem/idemredis"
	"github.com/unstuckhq/unstuck/internal/ops"
)

// keysFlag defines --keys on fs, defaulting to UNSTUCK_KEYS: where the
// idempotency records live when not in the console's database (Redis).
// Help shows the default cut after its scheme ([redactURL]).
func keysFlag(fs *flag.FlagSet, getenv func(string) string) *string {
	v := &databaseURL{raw: getenv("UNSTUCK_KEYS")}
	fs.Var(v, "keys", "idempotency records in Redis instead of --db: redis://[user:password@]host:port[/db][?prefix=P][&durability=D] "+
		"or redis+cluster://host:port?addr=host2:port&addr=host3:port[&prefix=P][&durability=D] (env UNSTUCK_KEYS); the console's own tables and the audit trail stay in --db. "+
		"A server must keep acknowledged writes across a crash (appendonly yes, appendfsync always); durability=risk accepts one that may lose them (logged), "+
		"durability=server asserts it of a service whose CONFIG is disabled")
	return &v.raw
}

// redactRedisURL returns a Redis URL with its password replaced.
func redactRedisURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return schemeOf(raw)
	}
	return u.Redacted()
}

// openRedisKeys connects to the Redis URL raw (see keysFlag) and checks it
// (idemredis.New refuses a server that cannot run the store safely).
func openRedisKeys(ctx context.Context, raw string, log *slog.Logger) (*idemredis.Store, func(), error) {
	redacted := redactRedisURL(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, errors.New("--keys: the URL cannot be parsed")
	}
	q := u.Query()
	cfg := idemredis.Config{Logger: log, Prefix: q.Get("prefix")}
	q.Del("prefix")
	switch d := q.Get("durability"); d {
	case "":
	case "risk":
		cfg.AcceptDurabilityRisk = true
	case "server":
		cfg.DurableServer = true
	default:
		return nil, nil, fmt.Errorf("--keys %s: durability=%q: use risk (accept a server that may lose acknowledged writes in a crash) "+
			"or server (the service keeps them by itself, where CONFIG is disabled)", redacted, d)
	}
	q.Del("durability")
	u.RawQuery = q.Encode()
	var c redis.UniversalClient
	switch u.Scheme {
	case "redis", "rediss":
		o, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, nil, fmt.Errorf("--keys %s: %w", redacted, err)
		}
		c = redis.NewClient(o)
	case "redis+cluster", "rediss+cluster":
		u.Scheme = strings.TrimSuffix(u.Scheme, "+cluster")
		o, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, nil, fmt.Errorf("--keys %s: %w", redacted, err)
		}
		c = redis.NewClusterClient(o)
	default:
		return nil, nil, fmt.Errorf("--keys must start with redis://, rediss://, redis+cluster:// or rediss+cluster:// (got %q)", schemeOf(raw))
	}
	s, err := idemredis.New(ctx, c, cfg)
	if err != nil {
		_ = c.Close()
		if errors.Is(err, idemredis.ErrNotDurable) {
			return nil, nil, fmt.Errorf("--keys %s: %w (in --keys: durability=risk accepts the risk, durability=server asserts a durable service)", redacted, err)
		}
		return nil, nil, fmt.Errorf("--keys %s: %w", redacted, err)
	}
	return s, func() { _ = c.Close() }, nil
}

// useRedisKeys makes d read and decide on the idempotency records of the
// Redis store at raw instead of its own: the engine, the key pages and the
// key decisions (intent, compare-and-swap, outcome: ops.NewKeysOnStore).
// It resolves first the decisions a crash interrupted
// (ops.ResolveKeyIntents), so call it after the audit keys are set and
// the schema checked. A no-op when raw is "".
func (d *database) useRedisKeys(ctx context.Context, raw string, log *slog.Logger) error {
	if raw == "" {
		return nil
	}
	s, closeRedis, err := openRedisKeys(ctx, raw, log)
	if err != nil {
		return err
	}
	n, err := ops.ResolveKeyIntents(ctx, d.Trail, s)
	if err != nil {
		closeRedis()
		return err
	}
	if n > 0 {
		log.Warn("resolved key decisions a stop interrupted between their intent and their outcome", "count", n)
	}
	d.Store, d.Records, d.redisKeys = s, s, s
	closeDB := d.Close
	d.Close = func() { closeRedis(); closeDB() }
	return nil
}
