package idem

import (
	"encoding/binary"
	"errors"
	"net/http"
)

// responseMagic starts the binary form of a StoredResponse, so it is never
// mistaken for the JSON of a Run result.
var responseMagic = [3]byte{'U', 'R', 1}

var errResponseFormat = errors.New("idem: not a stored response")

// MarshalBinary encodes r compactly: a magic prefix, the status, the
// headers (length-prefixed) and the body.
func (r StoredResponse) MarshalBinary() ([]byte, error) {
	if r.Status < 100 || r.Status > 999 {
		return nil, errors.New("idem: stored response status out of range")
	}
	n := 16 + len(r.Body)
	for k, vs := range r.Header {
		n += len(k) + 4
		for _, v := range vs {
			n += len(v) + 2
		}
	}
	b := make([]byte, 0, n)
	b = append(b, responseMagic[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(r.Status))
	b = binary.AppendUvarint(b, uint64(len(r.Header)))
	for k, vs := range r.Header {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return append(b, r.Body...), nil
}

// UnmarshalBinary decodes what MarshalBinary encoded. The body aliases b.
// Anything else is an error, never a panic.
func (r *StoredResponse) UnmarshalBinary(b []byte) error {
	if len(b) < len(responseMagic)+2 || [3]byte(b[:3]) != responseMagic {
		return errResponseFormat
	}
	b = b[3:]
	status := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if status < 100 || status > 999 {
		return errResponseFormat
	}
	count, b, ok := uvarint(b)
	if !ok || count > uint64(len(b)) {
		return errResponseFormat
	}
	var h http.Header
	if count > 0 {
		h = make(http.Header, count)
	}
	for range count {
		var name, value []byte
		var nvals uint64
		if name, b, ok = chunk(b); !ok {
			return errResponseFormat
		}
		if nvals, b, ok = uvarint(b); !ok || nvals > uint64(len(b))+1 {
			return errResponseFormat
		}
		vals := make([]string, 0, nvals)
		for range nvals {
			if value, b, ok = chunk(b); !ok {
				return errResponseFormat
			}
			vals = append(vals, string(value))
		}
		h[string(name)] = vals
	}
	*r = StoredResponse{Status: status, Header: h, Body: b}
	return nil
}

func uvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return v, b[n:], true
}

func chunk(b []byte) ([]byte, []byte, bool) {
	n, rest, ok := uvarint(b)
	if !ok || n > uint64(len(rest)) {
		return nil, nil, false
	}
	return rest[:n], rest[n:], true
}
