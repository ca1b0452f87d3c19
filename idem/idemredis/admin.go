package idemredis

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// defaultSweepLimit bounds a Sweep whose params give no limit.
const defaultSweepLimit = 1000

// entry is one index entry: a record's ID at a score.
type entry struct {
	id    int64
	score int64
}

// serverTime reads the server's clock (on a cluster, that of the node
// holding the index slot).
func (s *Store) serverTime(ctx context.Context) (time.Time, error) {
	var t time.Time
	var err error
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		var m *redis.Client
		if m, err = cc.MasterForKey(ctx, s.idxKeys[ixKeys]); err != nil {
			return t, err
		}
		t, err = m.Time(ctx).Result()
	} else {
		t, err = s.c.Time(ctx).Result()
	}
	return time.UnixMicro(t.UnixMicro()).UTC(), err
}

// fetch reads the records of entries from zset (the index they were
// read from; "" when none), checks each against its entry and returns
// those that match, in order. An entry whose record is gone, or whose
// record has moved on and was last written more than repairAge before
// now (its index step lost), is repaired; one whose record's index step
// may still be in flight is skipped.
func (s *Store) fetch(ctx context.Context, entries []entry, status idemdriver.Status, now time.Time) ([]idemdriver.Record, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = strconv.FormatInt(e.id, 10)
	}
	keys, err := s.c.HMGet(ctx, s.idxKeys[ixKeys], ids...).Result()
	if err != nil {
		return nil, err
	}
	cmds := make([]*redis.MapStringStringCmd, len(entries))
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			if k != nil {
				cmds[i] = p.HGetAll(ctx, k.(string))
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]idemdriver.Record, 0, len(entries))
	for i, e := range entries {
		var m map[string]string
		if cmds[i] != nil {
			m = cmds[i].Val()
		}
		if len(m) == 0 {
			rk, _ := keys[i].(string)
			if err := s.repair(ctx, rk, e.id); err != nil {
				return nil, err
			}
			continue
		}
		rec, err := decodeMap(m, now)
		if err != nil {
			return nil, err
		}
		if rec.ID != e.id {
			if err := s.repair(ctx, keys[i].(string), e.id); err != nil {
				return nil, err
			}
			continue
		}
		if rec.UpdatedAt.UnixMicro() != e.score || (status != "" && rec.Status != status) {
			if now.Sub(rec.UpdatedAt) > s.repairAge {
				if err := s.repair(ctx, keys[i].(string), e.id); err != nil {
					return nil, err
				}
			}
			continue
		}
		out = append(out, rec)
	}
	return out, nil
}

// repair re-indexes the record at rk from its state, or removes the
// index entries of id when rk is gone or holds another record (the ident
// was deleted and reserved again under a new ID).
func (s *Store) repair(ctx context.Context, rk string, id int64) error {
	if rk == "" {
		return s.index(ctx, "del", strconv.FormatInt(id, 10), "")
	}
	_, err := s.run(ctx, scriptReindex, rk, strconv.FormatInt(id, 10))
	return err
}

// walk pages through zset in the order of oldest (ascending (score,
// member)) or not (descending), from the position (afterScore, afterID)
// when set, within [lo, hi) on the score, calling fn with each batch of
// entries until fn returns false.
func (s *Store) walk(ctx context.Context, zset string, oldest, afterSet bool, afterScore, afterID int64,
	lo, hi *int64, batch int, fn func([]entry) (bool, error)) error {
	for {
		minS, maxS := "-inf", "+inf"
		if lo != nil {
			minS = strconv.FormatInt(*lo, 10)
		}
		if hi != nil {
			maxS = "(" + strconv.FormatInt(*hi, 10)
		}
		if afterSet {
			if oldest {
				if lo == nil || afterScore > *lo {
					minS = strconv.FormatInt(afterScore, 10)
				}
			} else if hi == nil || afterScore < *hi {
				maxS = strconv.FormatInt(afterScore, 10)
			}
		}
		args := []any{"ZRANGE", zset}
		if oldest {
			args = append(args, minS, maxS, "BYSCORE")
		} else {
			args = append(args, maxS, minS, "BYSCORE", "REV")
		}
		args = append(args, "LIMIT", 0, batch, "WITHSCORES")
		raw, err := s.c.Do(ctx, args...).Slice()
		if err != nil {
			return err
		}
		var got []entry
		for _, e := range scored(raw) {
			if afterSet && e.score == afterScore && ((oldest && e.id <= afterID) || (!oldest && e.id >= afterID)) {
				continue
			}
			got = append(got, e)
		}
		n := len(scored(raw))
		if len(got) == 0 {
			if n < batch {
				return nil
			}
			batch *= 2 // a batch of ties at the position: look further
			continue
		}
		more, err := fn(got)
		if err != nil || !more || n < batch {
			return err
		}
		last := got[len(got)-1]
		afterSet, afterScore, afterID = true, last.score, last.id
	}
}

// scored reads the reply of ZRANGE … WITHSCORES: member/score pairs under
// RESP3, a flat list under RESP2.
func scored(raw []any) []entry {
	var out []entry
	num := func(v any) int64 {
		switch x := v.(type) {
		case float64:
			return int64(x)
		case int64:
			return x
		}
		f, _ := strconv.ParseFloat(str(v), 64)
		return int64(f)
	}
	for i := 0; i < len(raw); i++ {
		if pair, ok := raw[i].([]any); ok && len(pair) == 2 {
			out = append(out, entry{id: atoi(str(pair[0])), score: num(pair[1])})
			continue
		}
		if i+1 < len(raw) {
			out = append(out, entry{id: atoi(str(raw[i])), score: num(raw[i+1])})
			i++
		}
	}
	return out
}

// ListKeys implements [idemdriver.Admin.ListKeys]. A status (or stuck)
// filter walks that status's index; every other filter walks the index of
// all records and checks each record read, so its cost grows with the
// records it skips. A key digest (with its scope and operation) is one
// look-up.
func (s *Store) ListKeys(ctx context.Context, f idemdriver.KeyFilter) (idemdriver.KeyPage, error) {
	q, err := f.Check()
	if err != nil {
		return idemdriver.KeyPage{}, err
	}
	now, err := s.serverTime(ctx)
	if err != nil {
		return idemdriver.KeyPage{}, wrap("list keys", err)
	}
	match := matcher(q, now, true)
	var recs []idemdriver.Record
	if len(q.KeyDigest) == 64 && q.Scope != "" && q.Operation != "" {
		rec, ok, err := s.Get(ctx, idemdriver.Ident{Scope: q.Scope, Operation: q.Operation, KeyDigest: q.KeyDigest})
		if err != nil {
			return idemdriver.KeyPage{}, err
		}
		rec.ReadAt = now
		if ok && match(rec) {
			recs = append(recs, rec)
		}
		return idemdriver.KeyPage{Records: recs}, nil
	}
	zset := s.idxKeys[ixUpdated]
	if q.Status != "" {
		zset = s.statusKey(q.Status)
	}
	var lo, hi *int64
	if !q.From.IsZero() {
		v := q.From.UnixMicro()
		lo = &v
	}
	if !q.To.IsZero() {
		v := q.To.UnixMicro()
		hi = &v
	}
	err = s.walk(ctx, zset, q.Order.Oldest(), q.AfterSet, q.AfterUpdatedAt.UnixMicro(), q.AfterID, lo, hi,
		max(q.Limit+1, 64), func(es []entry) (bool, error) {
			got, err := s.fetch(ctx, es, q.Status, now)
			if err != nil {
				return false, err
			}
			for _, r := range got {
				if match(r) {
					recs = append(recs, r)
				}
			}
			return len(recs) <= q.Limit, nil
		})
	if err != nil {
		return idemdriver.KeyPage{}, wrap("list keys", err)
	}
	page := idemdriver.KeyPage{Records: recs}
	if len(recs) > q.Limit {
		page.Records = recs[:q.Limit]
		page.Next = idemdriver.EncodeCursor(page.Records[q.Limit-1], q.Order)
	}
	return page, nil
}

// matcher returns the predicate of q's filters on a record read at now,
// with the cursor when withCursor is set.
func matcher(q idemdriver.KeyQuery, now time.Time, withCursor bool) func(idemdriver.Record) bool {
	return func(r idemdriver.Record) bool {
		return (q.Status == "" || r.Status == q.Status) &&
			(!q.Stuck || !now.Before(r.LeaseExpiresAt)) &&
			(q.Scope == "" || r.Scope == q.Scope) && (q.Operation == "" || r.Operation == q.Operation) &&
			(q.SkipOperationPrefix == "" || !strings.HasPrefix(r.Operation, q.SkipOperationPrefix)) &&
			(q.CorrelationID == "" || r.CorrelationID == q.CorrelationID) &&
			(q.ExternalRef == "" || r.ExternalRef == q.ExternalRef) &&
			(q.KeyDigest == "" || strings.HasPrefix(r.KeyDigest, q.KeyDigest)) && (q.KeyHash == "" || r.KeyHash == q.KeyHash) &&
			(q.From.IsZero() || !r.UpdatedAt.Before(q.From.Truncate(time.Microsecond))) &&
			(q.To.IsZero() || r.UpdatedAt.Before(q.To.Truncate(time.Microsecond))) &&
			(!withCursor || !q.AfterSet || after(r, q))
	}
}

// countScanFactor bounds the index entries a filtered CountKeys reads:
// this many times its upTo. Past it the count so far is a lower bound.
const countScanFactor = 4

// CountKeys implements [idemdriver.Admin.CountKeys]. A filter of a status
// alone, or no filter, is the cardinality of its index (ZCARD); any other
// filter walks the index as ListKeys does, reading at most
// countScanFactor × upTo entries: when it stops there, the count is "at
// least" what it found.
func (s *Store) CountKeys(ctx context.Context, f idemdriver.KeyFilter, upTo int) (idemdriver.KeyCount, error) {
	f.After = "" // ignored, as the contract says
	q, err := f.Check()
	if err != nil {
		return idemdriver.KeyCount{}, err
	}
	upTo = idemdriver.ClampCountUpTo(upTo)
	zset := s.idxKeys[ixUpdated]
	if q.Status != "" {
		zset = s.statusKey(q.Status)
	}
	plain := q.KeyFilter
	plain.Status, plain.Order, plain.Limit = "", "", 0
	if plain == (idemdriver.KeyFilter{}) {
		n, err := s.c.ZCard(ctx, zset).Result()
		if err != nil {
			return idemdriver.KeyCount{}, wrap("count keys", err)
		}
		return idemdriver.CappedCount(n, upTo), nil
	}
	now, err := s.serverTime(ctx)
	if err != nil {
		return idemdriver.KeyCount{}, wrap("count keys", err)
	}
	match := matcher(q, now, false)
	var lo, hi *int64
	if !q.From.IsZero() {
		v := q.From.UnixMicro()
		lo = &v
	}
	if !q.To.IsZero() {
		v := q.To.UnixMicro()
		hi = &v
	}
	var n, read int64
	complete := true
	err = s.walk(ctx, zset, false, false, 0, 0, lo, hi, 200, func(es []entry) (bool, error) {
		got, err := s.fetch(ctx, es, q.Status, now)
		if err != nil {
			return false, err
		}
		read += int64(len(es))
		for _, r := range got {
			if match(r) {
				n++
			}
		}
		if n > int64(upTo) || read >= int64(countScanFactor*upTo) {
			complete = false
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return idemdriver.KeyCount{}, wrap("count keys", err)
	}
	if !complete {
		return idemdriver.KeyCount{N: min(n, int64(upTo))}, nil
	}
	return idemdriver.CappedCount(n, upTo), nil
}

// after reports whether r comes after the query's cursor in its order.
func after(r idemdriver.Record, q idemdriver.KeyQuery) bool {
	c := cmp.Or(r.UpdatedAt.Compare(q.AfterUpdatedAt), cmp.Compare(r.ID, q.AfterID))
	if q.Order.Oldest() {
		return c > 0
	}
	return c < 0
}

func (s *Store) statusKey(st idemdriver.Status) string {
	return s.idxKeys[ixStatus+slices.Index(idemdriver.Statuses, st)]
}

// KeyByID implements [idemdriver.Admin.KeyByID] through the index of IDs.
func (s *Store) KeyByID(ctx context.Context, id int64) (idemdriver.Record, bool, error) {
	now, err := s.serverTime(ctx)
	if err != nil {
		return idemdriver.Record{}, false, wrap("key by id", err)
	}
	rk, err := s.c.HGet(ctx, s.idxKeys[ixKeys], strconv.FormatInt(id, 10)).Result()
	if errors.Is(err, redis.Nil) {
		return idemdriver.Record{}, false, nil
	}
	if err != nil {
		return idemdriver.Record{}, false, wrap("key by id", err)
	}
	m, err := s.c.HGetAll(ctx, rk).Result()
	if err != nil {
		return idemdriver.Record{}, false, wrap("key by id", err)
	}
	if len(m) == 0 || atoi(m["id"]) != id {
		return idemdriver.Record{}, false, nil
	}
	rec, err := decodeMap(m, now)
	if err != nil {
		return idemdriver.Record{}, false, wrap("key by id", err)
	}
	return rec, true, nil
}

// KeyOverview implements [idemdriver.Admin.KeyOverview] from the indexes:
// one pipeline of ZCARD, the first entry of each status and a ZCOUNT of
// the leases that ended. The counts are exact (Exact true) unless a
// finished record's native expiry may have removed it since its last
// sweep, which the index cannot see: then they may count such records
// and are flagged not exact (an upper bound). On a cluster a write whose
// index step has not run yet is not counted (see the package
// documentation).
func (s *Store) KeyOverview(ctx context.Context) (idemdriver.KeyOverview, error) {
	now, err := s.serverTime(ctx)
	if err != nil {
		return idemdriver.KeyOverview{}, wrap("key overview", err)
	}
	at := strconv.FormatInt(now.UnixMicro(), 10)
	cards := make([]*redis.IntCmd, len(idemdriver.Statuses))
	firsts := make([]*redis.ZSliceCmd, len(idemdriver.Statuses))
	var stuck, expired *redis.IntCmd
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, st := range idemdriver.Statuses {
			cards[i] = p.ZCard(ctx, s.statusKey(st))
			firsts[i] = p.ZRangeWithScores(ctx, s.statusKey(st), 0, 0)
		}
		stuck = p.ZCount(ctx, s.idxKeys[ixLease], "-inf", at)
		expired = p.ZCount(ctx, s.idxKeys[ixExpires], "-inf", "0")
		if s.grace > 0 {
			expired = p.ZCount(ctx, s.idxKeys[ixExpires], "-inf", strconv.FormatInt(now.Add(-s.grace).UnixMicro(), 10))
		}
		return nil
	})
	if err != nil {
		return idemdriver.KeyOverview{}, wrap("key overview", err)
	}
	exact := expired.Val() == 0
	o := idemdriver.KeyOverview{StuckProcessing: stuck.Val(), StuckExact: true, AsOf: now}
	for i, st := range idemdriver.Statuses {
		c := idemdriver.StatusCount{Status: st, Count: cards[i].Val(), Exact: exact || st == idemdriver.StatusPending || st == idemdriver.StatusProcessing}
		if z := firsts[i].Val(); len(z) > 0 {
			c.Oldest = time.UnixMicro(int64(z[0].Score)).UTC()
		}
		o.Counts = append(o.Counts, c)
	}
	return o, nil
}

// NeedsAttention implements [idemdriver.Admin.NeedsAttention]: the first
// pending and unavailable records of their indexes and the stuck ones of
// the processing index, merged.
func (s *Store) NeedsAttention(ctx context.Context, limit int) ([]idemdriver.Record, error) {
	limit = idemdriver.ClampLimit(limit)
	var out []idemdriver.Record
	for _, f := range []idemdriver.KeyFilter{
		{Status: idemdriver.StatusPending, Order: idemdriver.OrderOldest, Limit: limit},
		{Status: idemdriver.StatusUnavailable, Order: idemdriver.OrderOldest, Limit: limit},
		{Stuck: true, Order: idemdriver.OrderOldest, Limit: limit},
	} {
		page, err := s.ListKeys(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Records...)
	}
	slices.SortFunc(out, func(a, b idemdriver.Record) int {
		return cmp.Or(a.UpdatedAt.Compare(b.UpdatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out[:min(limit, len(out))], nil
}

// EachKey implements [idemdriver.Admin.EachKey] on ListKeys.
func (s *Store) EachKey(ctx context.Context, f idemdriver.KeyFilter, batch int, fn func([]idemdriver.Record) error) error {
	return idemdriver.EachKey(ctx, s.ListKeys, f, batch, fn)
}

// Sweep implements [idemdriver.Store.Sweep]: it walks the index of
// retention ends up to now, oldest first, reads each record, and applies
// the escalation or deletion it calls for by a script that checks the
// record's version first, so a record written meanwhile is left alone.
// Abandoned records are escalated before finished ones are deleted. A
// finished record Redis already removed by its native expiry is counted
// as deleted (its index entries are removed).
func (s *Store) Sweep(ctx context.Context, p idemdriver.SweepParams) (idemdriver.SweepResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultSweepLimit
	}
	now := p.Now
	if now.IsZero() {
		var err error
		if now, err = s.serverTime(ctx); err != nil {
			return idemdriver.SweepResult{}, wrap("sweep", err)
		}
	}
	now = time.UnixMicro(now.UnixMicro()).UTC()
	hi := now.UnixMicro() + 1
	type todo struct {
		rec  idemdriver.Record
		gone bool
		id   int64
	}
	var escalate, remove []todo
	err := s.walk(ctx, s.idxKeys[ixExpires], true, false, 0, 0, nil, &hi, 256, func(es []entry) (bool, error) {
		ids := make([]string, len(es))
		for i, e := range es {
			ids[i] = strconv.FormatInt(e.id, 10)
		}
		keys, err := s.c.HMGet(ctx, s.idxKeys[ixKeys], ids...).Result()
		if err != nil {
			return false, err
		}
		cmds := make([]*redis.MapStringStringCmd, len(es))
		if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range es {
				if rk, _ := keys[i].(string); rk != "" {
					cmds[i] = p.HGetAll(ctx, rk)
				}
			}
			return nil
		}); err != nil {
			return false, err
		}
		for i, e := range es {
			var m map[string]string
			if cmds[i] != nil {
				m = cmds[i].Val()
			}
			if len(m) == 0 || atoi(m["id"]) != e.id {
				if len(remove) < limit {
					remove = append(remove, todo{gone: true, id: e.id})
				}
				continue
			}
			rec, err := decodeMap(m, now)
			if err != nil {
				return false, err
			}
			switch {
			case now.Before(rec.ExpiresAt) || rec.Status == idemdriver.StatusPending || rec.LeaseLive():
			case rec.Status == idemdriver.StatusProcessing:
				escalate = append(escalate, todo{rec: rec})
			case len(remove) < limit:
				remove = append(remove, todo{rec: rec})
			}
		}
		// Enough found for one batch: stop walking. Reading on until the
		// escalations alone filled it walked the whole backlog each call.
		return len(escalate) < limit && len(remove) < limit, nil
	})
	if err != nil {
		return idemdriver.SweepResult{}, wrap("sweep", err)
	}
	var res idemdriver.SweepResult
	for _, t := range escalate {
		if res.Escalated >= limit {
			break
		}
		reason := idemdriver.AbandonedReason(t.rec.LeaseExpiresAt, "sweep")
		out, err := s.run(ctx, scriptSweepOne, s.recordKey(t.rec.Ident), strconv.FormatInt(now.UnixMicro(), 10),
			strconv.FormatInt(t.rec.Version, 10), "escalate", reason, "")
		if err != nil {
			return res, wrap("sweep", err)
		}
		res.Escalated += int(code(out))
	}
	for _, t := range remove {
		if res.Escalated+res.Deleted >= limit {
			break
		}
		if t.gone {
			if err := s.index(ctx, "del", strconv.FormatInt(t.id, 10), ""); err != nil {
				return res, wrap("sweep", err)
			}
			res.Deleted++
			continue
		}
		out, err := s.run(ctx, scriptSweepOne, s.recordKey(t.rec.Ident), strconv.FormatInt(now.UnixMicro(), 10),
			strconv.FormatInt(t.rec.Version, 10), "delete", "", "")
		if err != nil {
			return res, wrap("sweep", err)
		}
		res.Deleted += int(code(out))
	}
	return res, nil
}

// SeedRecords implements [idemdriver.Seeder]: each record is written as
// given by one script (refused if its ident exists) with an ID taken as a
// fence is (see the package documentation), and the counter is then
// raised above every fence seeded.
func (s *Store) SeedRecords(ctx context.Context, recs []idemdriver.Record) error {
	var top int64
	for _, r := range recs {
		if err := checkIdent(r.Ident); err != nil {
			return wrap("seed", err)
		}
		id, err := s.nextFence(ctx)
		if err != nil {
			return wrap("seed", err)
		}
		ids := []byte("[]")
		if len(r.ResourceIDs) > 0 {
			ids, _ = json.Marshal(r.ResourceIDs)
		}
		args := []any{id, "s", r.Scope, "o", r.Operation, "d", r.KeyDigest, "kh", r.KeyHash,
			"fp", r.Fingerprint, "st", string(r.Status), "rc", strconv.Itoa(r.ResponseCode), "cid", r.CorrelationID,
			"ext", r.ExternalRef, "rids", string(ids), "err", r.LastError, "tok", r.Token,
			"fen", strconv.FormatInt(r.Fence, 10), "att", strconv.Itoa(r.Attempts), "ver", strconv.FormatInt(r.Version, 10),
			"ca", strconv.FormatInt(r.CreatedAt.UnixMicro(), 10), "ua", strconv.FormatInt(r.UpdatedAt.UnixMicro(), 10),
			"ea", strconv.FormatInt(r.ExpiresAt.UnixMicro(), 10)}
		if r.Result != nil {
			args = append(args, "res", r.Result)
		}
		if !r.LeaseExpiresAt.IsZero() {
			args = append(args, "lease", strconv.FormatInt(r.LeaseExpiresAt.UnixMicro(), 10))
		}
		out, err := s.run(ctx, scriptSeed, s.recordKey(r.Ident), args...)
		if err != nil {
			return wrap("seed", err)
		}
		if code(out) != 1 {
			return wrap("seed", fmt.Errorf("a record exists for scope %q, operation %q and this key digest", r.Scope, r.Operation))
		}
		top = max(top, r.Fence)
	}
	if top > 0 {
		if err := scriptBump.Run(ctx, s.c, s.idxKeys[:1], strconv.FormatInt(top, 10)).Err(); err != nil {
			return wrap("seed", err)
		}
	}
	return nil
}
