package store

import (
	"encoding/binary"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/alexedwards/scs/v2"
)

// SessionCodec is the console's scs codec: scs's gob encoding, so that
// consoles of every version read the sessions any of them wrote (a rolling
// upgrade mixes them), with a memory of the sessions it decoded and
// encoded. scs decodes the stored session and encodes it again on every
// request, and gob builds a new encoder or decoder, type descriptions
// included, each time: with the unchanged-commit check's decoding, a tenth
// of a list page's CPU. With the memory, a session that did not
// change since it was last seen is neither decoded nor encoded again, and
// its encoding is the same bytes, so the unchanged commit is recognised by
// comparing bytes. The memory holds at most sessionCodecMemory sessions
// and forgets them all when full; sessions with values of a type other
// than string, int64, int, bool, float64, []byte and time.Time are not
// remembered. Use NewSessionCodec; the zero value remembers nothing.
type SessionCodec struct {
	m *sessionMemory
}

// ConsoleSessionCodec is the codec of the console's session manager and
// of its session store, which decodes sessions too (the user's ID, and
// whether a commit changes anything): one memory for both.
var ConsoleSessionCodec = NewSessionCodec()

// sessionCodecMemory bounds how many sessions a SessionCodec remembers.
const sessionCodecMemory = 4096

// NewSessionCodec returns a SessionCodec with an empty memory.
func NewSessionCodec() SessionCodec {
	return SessionCodec{m: &sessionMemory{byBytes: map[string]rememberedSession{}, byValue: map[string]string{}}}
}

var _ scs.Codec = SessionCodec{}

// sessionMemory maps gob encodings to what they decode to, and canonical
// encodings (sessionKey) to the gob encoding first made of them.
type sessionMemory struct {
	mu      sync.Mutex
	byBytes map[string]rememberedSession
	byValue map[string]string
}

type rememberedSession struct {
	deadline time.Time
	values   map[string]any
}

// Encode implements scs.Codec.
func (c SessionCodec) Encode(deadline time.Time, values map[string]any) ([]byte, error) {
	key, ok := sessionKey(deadline, values)
	if ok && c.m != nil {
		c.m.mu.Lock()
		b, seen := c.m.byValue[key]
		c.m.mu.Unlock()
		if seen {
			return []byte(b), nil
		}
	}
	b, err := scs.GobCodec{}.Encode(deadline, values)
	if err == nil && ok {
		c.remember(b, key, deadline, values)
	}
	return b, err
}

// Decode implements scs.Codec. The values are the caller's to change.
func (c SessionCodec) Decode(b []byte) (time.Time, map[string]any, error) {
	if c.m != nil {
		c.m.mu.Lock()
		s, seen := c.m.byBytes[string(b)]
		c.m.mu.Unlock()
		if seen {
			return s.deadline, maps.Clone(s.values), nil
		}
	}
	deadline, values, err := scs.GobCodec{}.Decode(b)
	if err != nil {
		return deadline, values, err
	}
	if key, ok := sessionKey(deadline, values); ok {
		c.remember(b, key, deadline, values)
	}
	return deadline, values, nil
}

func (c SessionCodec) remember(b []byte, key string, deadline time.Time, values map[string]any) {
	if c.m == nil {
		return
	}
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	if len(c.m.byBytes) >= sessionCodecMemory || len(c.m.byValue) >= sessionCodecMemory {
		clear(c.m.byBytes)
		clear(c.m.byValue)
	}
	c.m.byBytes[string(b)] = rememberedSession{deadline: deadline, values: maps.Clone(values)}
	if _, ok := c.m.byValue[key]; !ok {
		c.m.byValue[key] = string(b)
	}
}

// Value tags of sessionKey.
const (
	tagString = 's'
	tagInt64  = 'i'
	tagInt    = 'n'
	tagBool   = 'b'
	tagFloat  = 'f'
	tagBytes  = 'y'
	tagTime   = 't'
)

// sessionKey is a canonical encoding of a session — the same for equal
// sessions whatever the map's order, different for different ones (every
// key and value is length- or type-delimited) — or false when a value has
// a type it does not encode.
func sessionKey(deadline time.Time, values map[string]any) (string, bool) {
	keys := slices.Sorted(maps.Keys(values))
	b := make([]byte, 0, 128)
	dl, err := deadline.MarshalBinary()
	if err != nil {
		return "", false
	}
	b = appendSessionString(b, string(dl))
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendSessionString(b, k)
		switch v := values[k].(type) {
		case string:
			b = appendSessionString(append(b, tagString), v)
		case int64:
			b = binary.AppendVarint(append(b, tagInt64), v)
		case int:
			b = binary.AppendVarint(append(b, tagInt), int64(v))
		case bool:
			t := byte(0)
			if v {
				t = 1
			}
			b = append(b, tagBool, t)
		case float64:
			b = binary.BigEndian.AppendUint64(append(b, tagFloat), math.Float64bits(v))
		case []byte:
			b = appendSessionString(append(b, tagBytes), string(v))
		case time.Time:
			bin, err := v.MarshalBinary() // instant and zone offset, what gob keeps
			if err != nil {
				return "", false
			}
			b = appendSessionString(append(b, tagTime), string(bin))
		default:
			return "", false
		}
	}
	return string(b), true
}

func appendSessionString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}
