package store

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/alexedwards/scs/v2"
)

// SessionCodec is the console's scs codec: the session's deadline and
// values in a compact binary form with the keys in order, so that the same
// session always encodes to the same bytes. scs's gob codec made a new
// gob encoder or decoder, type descriptions included, on every request
// (issue 12: a tenth of a list page's CPU); its random map order also made
// two encodings of one session differ, so that skipping an unchanged
// commit had to decode both.
//
// Values of type string, int64, int, bool, float64, []byte and time.Time
// are encoded so; a session holding a value of any other type is encoded
// whole by scs.GobCodec instead. Decode reads both forms: sessions written
// by earlier versions stay valid.
type SessionCodec struct{}

// sessionCodecMagic starts every encoding of SessionCodec. A gob stream
// never starts with a zero byte (its first byte is a message's non-zero
// length), so the two forms cannot be mistaken for each other.
const sessionCodecMagic = 0x00

// Value tags.
const (
	tagString = 's'
	tagInt64  = 'i'
	tagInt    = 'n'
	tagBool   = 'b'
	tagFloat  = 'f'
	tagBytes  = 'y'
	tagTime   = 't'
)

var _ scs.Codec = SessionCodec{}

// Encode implements scs.Codec.
func (SessionCodec) Encode(deadline time.Time, values map[string]any) ([]byte, error) {
	keys := make([]string, 0, len(values))
	for k, v := range values {
		switch v.(type) {
		case string, int64, int, bool, float64, []byte, time.Time:
		default:
			return scs.GobCodec{}.Encode(deadline, values)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := make([]byte, 0, 64)
	b = append(b, sessionCodecMagic)
	b = binary.AppendVarint(b, deadline.UnixNano())
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
			bin, err := v.MarshalBinary() // keeps the zone offset, as gob does
			if err != nil {
				return nil, err
			}
			b = appendSessionString(append(b, tagTime), string(bin))
		}
	}
	return b, nil
}

// Decode implements scs.Codec, for both forms (see SessionCodec).
func (SessionCodec) Decode(b []byte) (time.Time, map[string]any, error) {
	if len(b) == 0 || b[0] != sessionCodecMagic {
		return scs.GobCodec{}.Decode(b)
	}
	d := sessionDecoder{b: b[1:]}
	deadline := time.Unix(0, d.varint())
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		return time.Time{}, nil, errSessionEncoding
	}
	values := make(map[string]any, n)
	for range n {
		k := d.string()
		switch d.byte() {
		case tagString:
			values[k] = d.string()
		case tagInt64:
			values[k] = d.varint()
		case tagInt:
			values[k] = int(d.varint())
		case tagBool:
			values[k] = d.byte() == 1
		case tagFloat:
			values[k] = math.Float64frombits(binary.BigEndian.Uint64(d.take(8)))
		case tagBytes:
			values[k] = []byte(d.string())
		case tagTime:
			var t time.Time
			if err := t.UnmarshalBinary([]byte(d.string())); err != nil {
				return time.Time{}, nil, errSessionEncoding
			}
			values[k] = t
		default:
			d.err = errSessionEncoding
		}
		if d.err != nil {
			return time.Time{}, nil, errSessionEncoding
		}
	}
	if len(d.b) != 0 {
		return time.Time{}, nil, errSessionEncoding
	}
	return deadline, values, nil
}

var errSessionEncoding = errors.New("session: not a valid encoding")

func appendSessionString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// sessionDecoder reads SessionCodec's encoding; the first error sticks
// and every later read returns zero values.
type sessionDecoder struct {
	b   []byte
	err error
}

func (d *sessionDecoder) take(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.err = errSessionEncoding
		return make([]byte, max(n, 8))
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *sessionDecoder) byte() byte { return d.take(1)[0] }

func (d *sessionDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if d.err == nil && n <= 0 {
		d.err = errSessionEncoding
	}
	if d.err != nil {
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *sessionDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if d.err == nil && n <= 0 {
		d.err = errSessionEncoding
	}
	if d.err != nil {
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *sessionDecoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = errSessionEncoding
		return ""
	}
	return string(d.take(int(n)))
}
