package idemredis

import "github.com/redis/go-redis/v9"

// The Lua of the store. Each record primitive is one script on the
// record's hash (KEYS[1]); its body ends with fin(out, chg), where chg is
// the index change {op, id, record key, status, updated_at, lease end,
// expires_at, version} or nil. The two variants of every script differ in
// fin only:
//
//   - single server: the index keys follow the record key in KEYS and fin
//     applies chg to them in the same script, so record and indexes change
//     in one atomic step;
//   - cluster: KEYS is the record key alone (one hash slot) and fin
//     returns {out, chg}; the store then runs scriptIndex with chg on the
//     index slot, a second round trip.
//
// Times are Unix microseconds, integers below 2^53, exact in Lua's
// doubles; f formats them without an exponent. An empty now argument
// means the server's clock (TIME: scripts replicate their effects, so a
// replica sees the written values, not the call).

// Fences. A new fence (and a new record's ID, the fence of its first
// reservation) is max(counter + 1, the server's clock in Unix
// microseconds from TIME), and the counter is set to it, in the script
// that uses it (on a cluster, in scriptFence on the index slot).
//
// The counter alone would make fences strictly increasing only as long as
// the server keeps every write. A crash of a server whose AOF is not
// fsynced at each write (appendfsync everysec, AOF off) loses a suffix
// of its acknowledged writes, counter increments included: the counter
// comes back lower, and the next reservation or takeover would hand out
// again a fence some owner already holds, so that two owners, or two
// records, share it. The clock does not go back with the lost writes: a
// fence is at most a few µs ahead of the clock that issued it (Redis
// cannot run a script per µs for long), and the clock after the restart
// is past the crash by the time the restart took. So every fence after
// the restart is above every fence handed out before it, whatever the
// counter lost. Without a loss the counter keeps fences strictly
// increasing whatever the clock does (a stall, a step back).
//
// This assumes the clock of the server that comes back (the restarted
// one, or a promoted replica) is not behind the crashed one's by more
// than the time the crash and restart took, and that no fence was seeded
// far above the clock (SeedRecords raises the counter to the highest
// fence seeded). Fences stay below 2^53, exact in Lua's doubles, until
// the year 2255.
const luaNextFence = `
local function nextFence(ck)
  local t = redis.call('TIME')
  local n = math.max(tonumber(redis.call('GET', ck) or '0') + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
  redis.call('SET', ck, f(n))
  return f(n)
end
`

// The index keys, by their offset in idxKeys (and in KEYS from X).
const (
	ixCounter = iota // fences and IDs (see luaNextFence)
	ixKeys           // hash id -> record key
	ixVers           // hash id -> indexed version:status
	ixUpdated        // zset of every record by updated_at
	ixLease          // zset of processing records by lease end
	ixExpires        // zset of records but pending ones by expires_at
	ixStatus         // five zsets, one per status in idemdriver.Statuses order, by updated_at
)

const luaPrelude = `
local function f(x) return string.format('%.0f', x) end
local function clock(a)
  if a ~= '' then return tonumber(a) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local rk = KEYS[1]
`

// luaIndex is the index change; K(i) is the index key at offset i.
const luaIndex = `
local function K(i) return KEYS[X + i] end
local SS = {processing = 6, pending = 7, unavailable = 8, failed = 9, completed = 10}
local function idx(c)
  local m = string.rep('0', 19 - #c[2]) .. c[2]
  local v = redis.call('HGET', K(2), c[2])
  local old = nil
  if v then
    local sep = string.find(v, ':', 1, true)
    if c[1] == 'set' and tonumber(string.sub(v, 1, sep - 1)) > tonumber(c[8]) then return end
    old = string.sub(v, sep + 1)
  end
  if old then
    redis.call('ZREM', K(SS[old]), m)
    if old == 'processing' then redis.call('ZREM', K(4), m) end
  elseif c[1] == 'del' then
    for _, i in pairs(SS) do redis.call('ZREM', K(i), m) end
    redis.call('ZREM', K(4), m)
  end
  if c[1] == 'del' then
    redis.call('ZREM', K(3), m)
    redis.call('ZREM', K(5), m)
    redis.call('HDEL', K(1), c[2])
    redis.call('HDEL', K(2), c[2])
    return
  end
  redis.call('ZADD', K(3), c[5], m)
  redis.call('ZADD', K(SS[c[4]]), c[5], m)
  if c[4] == 'processing' then redis.call('ZADD', K(4), c[6], m) end
  if c[4] == 'pending' then redis.call('ZREM', K(5), m) else redis.call('ZADD', K(5), c[7], m) end
  if not old then redis.call('HSET', K(1), c[2], c[3]) end
  redis.call('HSET', K(2), c[2], c[8] .. ':' .. c[4])
end
`

const luaFinSingle = `
local X = 2
local CLUSTER = false
` + luaIndex + luaNextFence + `
local function fin(out, chg)
  if chg then idx(chg) end
  return out
end
`

const luaFinCluster = `
local CLUSTER = true
local function K(i) return nil end
local function fin(out, chg)
  return {out, chg or false}
end
`

// luaChange builds the index change of the record as it now is.
const luaChange = `
local function change()
  local r = redis.call('HMGET', rk, 'id', 'st', 'ua', 'lease', 'ea', 'ver')
  return {'set', r[1], rk, r[2], r[3], r[4] or '0', r[5], r[6]}
end
local function expire(st, grace)
  if grace ~= '' and (st == 'completed' or st == 'failed' or st == 'unavailable') then
    local ea = tonumber(redis.call('HGET', rk, 'ea'))
    redis.call('PEXPIREAT', rk, f(math.floor((ea + tonumber(grace)) / 1000)))
  end
end
local function owned(tok, fen)
  local r = redis.call('HMGET', rk, 'tok', 'fen', 'st')
  return r[3] == 'processing' and r[1] == tok and r[2] == fen
end
`

// Reserve: ARGV now, lease µs, ttl µs, scope, operation, digest, key hash,
// fingerprint, owner, fence ("" takes the next one, see luaNextFence, on a
// single server; on a cluster the script answers {2} and the store
// retries with one from scriptFence), lean ("1"), trace ID. Answers {0, now, fields} for an existing record ({3,
// now, lean values} when lean: see leanFields), {1, now, id} for a
// created one.
const luaReserve = `
local now = clock(ARGV[1])
if ARGV[11] == '1' then
  local l = redis.call('HMGET', rk, 'id', 'fp', 'st', 'res', 'tok', 'fen', 'lease', 'ca', 'ea')
  if l[1] then return fin({3, f(now), l}, nil) end
else
  local e = redis.call('HGETALL', rk)
  if #e > 0 then return fin({0, f(now), e}, nil) end
end
local fence = ARGV[10]
if fence == '' then
  if CLUSTER then return fin({2}, nil) end
  fence = nextFence(K(0))
end
local lease = now + tonumber(ARGV[2])
local ea = now + math.max(tonumber(ARGV[3]), tonumber(ARGV[2]))
redis.call('HSET', rk, 'id', fence, 's', ARGV[4], 'o', ARGV[5], 'd', ARGV[6], 'kh', ARGV[7], 'fp', ARGV[8],
  'st', 'processing', 'rc', '0', 'cid', '', 'ext', '', 'rids', '[]', 'err', '', 'tok', ARGV[9], 'fen', fence,
  'lease', f(lease), 'att', '1', 'ver', '1', 'ca', f(now), 'ua', f(now), 'ea', f(ea), 'tr', ARGV[12])
return fin({1, f(now), fence}, {'set', fence, rk, 'processing', f(now), f(lease), f(ea), '1'})
`

// Takeover: ARGV now, seen owner, seen fence, new owner, lease µs, fresh
// ("1"), fingerprint, ttl µs, fence (as in Reserve), trace ID. Answers {0} when
// fenced, {2} when a cluster needs a fence, {1, now, fields}.
const luaTakeover = `
local now = clock(ARGV[1])
local r = redis.call('HMGET', rk, 'tok', 'fen', 'lease', 'st')
if not r[1] or r[1] ~= ARGV[2] or r[2] ~= ARGV[3] or r[4] == 'pending' then return fin({0}, nil) end
if r[3] and tonumber(r[3]) > now then return fin({0}, nil) end
local fence = ARGV[9]
if fence == '' then
  if CLUSTER then return fin({2}, nil) end
  fence = nextFence(K(0))
end
local lease = now + tonumber(ARGV[5])
redis.call('HSET', rk, 'tok', ARGV[4], 'fen', fence, 'st', 'processing', 'lease', f(lease), 'ua', f(now), 'tr', ARGV[10])
redis.call('HINCRBY', rk, 'ver', 1)
if ARGV[6] == '1' then
  redis.call('HSET', rk, 'att', '1', 'ca', f(now), 'fp', ARGV[7],
    'ea', f(now + math.max(tonumber(ARGV[8]), tonumber(ARGV[5]))),
    'rc', '0', 'cid', '', 'ext', '', 'err', '', 'rids', '[]')
  redis.call('HDEL', rk, 'res')
else
  redis.call('HINCRBY', rk, 'att', 1)
end
redis.call('PERSIST', rk)
return fin({1, f(now), redis.call('HGETALL', rk)}, change())
`

// Complete: ARGV now, owner, fence, status, has result ("1"), result,
// response code, last error, grace µs of native expiry ("" for none).
const luaComplete = `
if not owned(ARGV[2], ARGV[3]) then return fin({0}, nil) end
local now = clock(ARGV[1])
redis.call('HSET', rk, 'st', ARGV[4], 'rc', ARGV[7], 'err', ARGV[8], 'ua', f(now))
redis.call('HDEL', rk, 'lease')
if ARGV[5] == '1' then redis.call('HSET', rk, 'res', ARGV[6]) else redis.call('HDEL', rk, 'res') end
redis.call('HINCRBY', rk, 'ver', 1)
local chg = change()
expire(ARGV[4], ARGV[9])
return fin({1}, chg)
`

// Annotate: ARGV now, owner, fence, correlation id, external ref,
// resource ids (a JSON array, appended).
const luaAnnotate = `
if not owned(ARGV[2], ARGV[3]) then return fin({0}, nil) end
local now = clock(ARGV[1])
if ARGV[4] ~= '' then redis.call('HSET', rk, 'cid', ARGV[4]) end
if ARGV[5] ~= '' then redis.call('HSET', rk, 'ext', ARGV[5]) end
if ARGV[6] ~= '[]' then
  local cur = redis.call('HGET', rk, 'rids')
  if cur == '[]' then cur = ARGV[6] else cur = string.sub(cur, 1, -2) .. ',' .. string.sub(ARGV[6], 2) end
  redis.call('HSET', rk, 'rids', cur)
end
redis.call('HSET', rk, 'ua', f(now))
redis.call('HINCRBY', rk, 'ver', 1)
return fin({1}, change())
`

// Release: ARGV owner, fence.
const luaRelease = `
if not owned(ARGV[1], ARGV[2]) then return fin({0}, nil) end
local id = redis.call('HGET', rk, 'id')
redis.call('DEL', rk)
return fin({1}, {'del', id, rk})
`

// Extend: ARGV now, owner, fence, lease µs. Answers {1, lease end}.
const luaExtend = `
if not owned(ARGV[2], ARGV[3]) then return fin({0}, nil) end
local now = clock(ARGV[1])
local r = redis.call('HMGET', rk, 'lease', 'ea')
local lease = math.max(tonumber(r[1]), now + tonumber(ARGV[4]))
redis.call('HSET', rk, 'lease', f(lease), 'ea', f(math.max(tonumber(r[2]), lease)), 'ua', f(now))
redis.call('HINCRBY', rk, 'ver', 1)
return fin({1, f(lease)}, change())
`

// Get: ARGV now. Answers {now, fields}.
const luaGet = `
return fin({f(clock(ARGV[1])), redis.call('HGETALL', rk)}, nil)
`

// Delete: answers {1} when the record existed.
const luaDelete = `
local id = redis.call('HGET', rk, 'id')
if not id then return fin({0}, nil) end
redis.call('DEL', rk)
return fin({1}, {'del', id, rk})
`

// Settle: ARGV now, version, delete ("1"), status, external ref, last
// error, grace µs. Answers {0} when stale, {1} when deleted, {1, now,
// fields}.
const luaSettle = `
local r = redis.call('HMGET', rk, 'ver', 'id')
if not r[1] or r[1] ~= ARGV[2] then return fin({0}, nil) end
if ARGV[3] == '1' then
  redis.call('DEL', rk)
  return fin({1}, {'del', r[2], rk})
end
local now = clock(ARGV[1])
redis.call('HSET', rk, 'st', ARGV[4], 'err', ARGV[6], 'tok', '', 'ua', f(now))
if ARGV[5] ~= '' then redis.call('HSET', rk, 'ext', ARGV[5]) end
redis.call('HDEL', rk, 'res', 'lease')
redis.call('HINCRBY', rk, 'ver', 1)
redis.call('PERSIST', rk)
local chg = change()
expire(ARGV[4], ARGV[7])
return fin({1, f(now), redis.call('HGETALL', rk)}, chg)
`

// SweepOne: ARGV now, version, action ("escalate" or "delete"), reason,
// grace. Applies the action the store chose from the record at version;
// answers {0} when the record changed meanwhile.
const luaSweepOne = `
local r = redis.call('HMGET', rk, 'ver', 'id')
if not r[1] or r[1] ~= ARGV[2] then return fin({0}, nil) end
if ARGV[3] == 'delete' then
  redis.call('DEL', rk)
  return fin({1}, {'del', r[2], rk})
end
redis.call('HSET', rk, 'st', 'pending', 'err', ARGV[4], 'tok', '', 'ua', f(clock(ARGV[1])))
redis.call('HDEL', rk, 'lease')
redis.call('HINCRBY', rk, 'ver', 1)
redis.call('PERSIST', rk)
return fin({1}, change())
`

// Reindex: the index change of the record as it is, or the removal of
// the entries of id (ARGV) when the key is gone or holds another record. Repairs an index entry a read found
// stale.
const luaReindex = `
local id = redis.call('HGET', rk, 'id')
if id ~= ARGV[1] then return fin({0}, {'del', ARGV[1], rk}) end
return fin({1}, change())
`

// Seed: ARGV id, then field/value pairs. Refuses an existing record.
const luaSeed = `
if redis.call('EXISTS', rk) == 1 then return fin({0}, nil) end
redis.call('HSET', rk, 'id', ARGV[1], unpack(ARGV, 2))
return fin({1}, change())
`

// scriptIndex applies one index change (ARGV) to the index keys (KEYS):
// the second step of a cluster write.
var scriptIndex = redis.NewScript("local X = 1\n" + luaIndex + "\nidx(ARGV)\nreturn 1\n")

// scriptFence takes the next fence from the counter (KEYS[1]): a
// cluster's reservation or takeover, and a seeded record's ID.
var scriptFence = redis.NewScript(`
local function f(x) return string.format('%.0f', x) end
` + luaNextFence + `
return nextFence(KEYS[1])
`)

// scriptBump raises the counter (KEYS[1]) to at least ARGV[1].
var scriptBump = redis.NewScript(`
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
if v < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
`)

// scriptPair is one record script in its two variants.
type scriptPair struct {
	single, cluster *redis.Script
}

func newPair(body string) scriptPair {
	return scriptPair{
		single:  redis.NewScript(luaPrelude + luaFinSingle + luaChange + body),
		cluster: redis.NewScript(luaPrelude + luaFinCluster + luaChange + body),
	}
}

var (
	scriptReserve  = newPair(luaReserve)
	scriptTakeover = newPair(luaTakeover)
	scriptComplete = newPair(luaComplete)
	scriptAnnotate = newPair(luaAnnotate)
	scriptRelease  = newPair(luaRelease)
	scriptExtend   = newPair(luaExtend)
	scriptGet      = newPair(luaGet)
	scriptDelete   = newPair(luaDelete)
	scriptSettle   = newPair(luaSettle)
	scriptSweepOne = newPair(luaSweepOne)
	scriptReindex  = newPair(luaReindex)
	scriptSeed     = newPair(luaSeed)
)
