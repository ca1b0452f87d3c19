// Package idemredis is the Redis driver of unstuck on go-redis v9: an
// [idemdriver.Store], [idemdriver.Admin] and [idemdriver.Seeder] over a
// single server (a *redis.Client, also a Sentinel failover client) or a
// Redis Cluster (a *redis.ClusterClient).
//
// # Use
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	// or redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds})
//	store, err := idemredis.New(ctx, rdb, idemredis.Config{}) // checks the server; nothing to migrate
//	engine, err := idem.New(store, idem.Config{Secret: secret})
//
// New refuses, with an error matching [ErrUnsupported] that says what to
// change: Redis before 6.2; a server or proxy that does not run scripts by
// EVALSHA (every primitive is one Lua script, which Redis runs atomically);
// a cluster node reached by a plain client; a maxmemory-policy other
// than noeviction (allkeys-* and volatile-* may evict a finished record,
// and a repeat of its key would run again) unless [Config].EvictionAllowed,
// which logs a warning instead; and persistence under which a crash can
// lose an acknowledged write (see Durability below). Keys start with
// [DefaultPrefix] or [Config].Prefix.
//
// # Records, fences and time
//
// A record is one hash, prefix{h}, where h is derived from (scope,
// operation, key digest): the braces are a hash tag, so every key a record
// script touches is in one slot and runs unchanged on a cluster. Every
// primitive (reserve if absent, takeover by compare-and-swap on owner and
// fence, complete, annotate, release, extend, settle by version, sweep of
// one record) is one script on that hash. A repeat of a key is one
// EVALSHA.
//
// A new fence is max(counter + 1, the server's clock in Unix
// microseconds), taken in the script that hands it out: strictly
// increasing for every record, and never repeated even after a crash
// that lost acknowledged writes and took the counter back with them
// (the clock does not go back with them). A record's ID is the fence of
// its first reservation, so IDs are about the Unix time of creation in
// µs and never repeat either. This assumes the clock of a restarted
// server or promoted replica is not behind the crashed one's by more
// than the time the crash and restart took. Times are the server's clock
// (TIME inside the script, Unix microseconds) unless the params carry
// Now; fences always use the server's clock.
//
// Retention is native for finished records: Complete and Settle set
// PEXPIREAT at ExpiresAt plus a grace ([DefaultExpiryGrace],
// [Config].ExpiryGrace), a backstop should no sweeper run. Processing and
// pending records never carry an expiry: [Store.Sweep] escalates an
// abandoned record to pending instead of dropping it.
//
// # Indexes, and a cluster
//
// The admin reads (the console's lists, counts and look-ups) use sorted
// sets by updated_at (all records, and one per status), by lease end and
// by retention end, and a hash from ID to record key. They live in one
// slot of their own, prefix{prefix idx}, which in a cluster cannot be the
// record's slot:
//
//   - on a single server each record script updates the indexes in the
//     same script: record and indexes change atomically, and
//     [Store.KeyOverview]'s counts are exact;
//   - on a cluster a write is two steps: the record script, then an index
//     script with the change it returned (guarded by the record's
//     version, so that late steps do not undo newer ones). A reservation
//     takes its fence from the counter in a round trip of its own first:
//     a first request costs 3 round trips, a completion 2, a repeat 1.
//     Between the two steps, and forever if the process dies between
//     them, the index lags the record. The record is the truth: every
//     list reads the records its index entries name and checks each; an
//     entry whose record is gone, or has moved on and was written more
//     than 10 s ago, is repaired by that read; a younger one is skipped
//     (its index step is presumably in flight). Counts are exact as of
//     the index: a record whose index step has not run is not counted
//     yet.
//
// On both, a finished record that Redis expired natively keeps its index
// entries until a read or a sweep meets them; KeyOverview then flags the
// counts of the finished statuses not exact (they are an upper bound)
// while any entry is past its retention plus the grace. Filters other
// than status, stuck and key digest (scope, operation, references, key
// hash, time range) walk the updated_at index and test each record: their
// cost grows with the records they pass over. The index slot takes every
// write's index step: on a cluster it is one master's load.
//
// # Durability
//
// Redis acknowledges a write once the master applied it in memory; what
// a crash loses depends on its persistence. With AOF and appendfsync
// always the write is in the AOF and fsynced before the reply: a crash
// of the server loses no acknowledged write. With appendfsync everysec
// (the usual setting) a crash loses up to about a second of acknowledged
// writes, more while an fsync is slow (Redis then holds the AOF write
// back and still replies), even when only the process is killed; with
// AOF off, everything since the last snapshot. With replication a
// failover loses what the replica had not received. For idempotency a
// lost reservation lets a repeat of the key run again while the first
// run may still be going, and answer differently; a lost completion
// leaves the key processing until its lease ends, then (by default)
// pending. Measured in TestCrashLosingWritesKeepsFences and
// TestKillWithAppendfsyncAlwaysRunsNoKeyTwice (see the README's
// "Measured under faults").
//
// So [New] reads appendonly and appendfsync on every master and refuses,
// naming the setting (the error matches [ErrNotDurable] too), AOF off or
// appendfsync other than always, unless:
//
//   - the store waits for durability per write: [Config].WaitAOFTimeout (WAITAOF 1
//     0 after every write that changed something: fsynced to the
//     master's AOF; Redis 7.2 or later, AOF on) or [Config].WaitReplicas with
//     replicas ≥ 1 (WAIT: on that many replicas; this keeps a write
//     only when a crashed master is failed over to such a replica, not
//     when it restarts from its own files, and WAIT is not a consensus:
//     a replica that acknowledged may still lose the election to one
//     that did not, in rare double failures). A write that is not
//     acknowledged in time returns an error; the write itself stands.
//     TestFailoverKeepsAcknowledgedKeys kills a master of a 3-master
//     cluster with replicas and checks that every key acknowledged under
//     WaitReplicas: 1 replays;
//   - or the caller accepts the risk with [Config].AcceptDurabilityRisk, which
//     logs a warning naming the setting and its consequence.
//
// Where CONFIG GET is refused (renamed or denied, as on managed services)
// New cannot check, says so and refuses, unless a per-write wait,
// [Config].AcceptDurabilityRisk, or [Config].DurableServer (the caller asserts the
// service keeps acknowledged writes by itself; logged at Info) is set;
// AOF off reported by INFO is refused even then.
//
// # Not offered
//
// The store is not an [idemdriver.TxStore]: Redis cannot share a
// transaction with the application's SQL writes, so the HTTP
// middleware's transactional mode refuses it when it is built. An
// operator's decision on a Redis key and its audit entry in SQL cannot be
// one transaction either: the console (console serve --keys) records the
// intent in its audit trail, applies the decision by [Store.Settle]'s
// compare-and-swap on the record's version, records the outcome, and at
// start-up gives every intent left without an outcome one from the
// record's state (see the README's "Stores").
package idemredis
