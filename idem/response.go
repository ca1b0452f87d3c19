package idem

import (
	"encoding/binary"
	"errors"
	"net/http"
	"strings"
)

// responseMagic starts the binary form of a StoredResponse, so it is never
// mistaken for the JSON of a Run result.
var responseMagic = [3]byte{'U', 'R', 1}

var errResponseFormat = errors.New("idem: not a stored response")

// MarshalBinary encodes r compactly: a magic prefix, the status, the
// headers (length-prefixed) and the body.
func (r StoredResponse) MarshalBinary() ([]byte, error) {
	if r.Status < 100 || r.Status > 999 {
		return nil, errResponseStatus
	}
	b := appendResponseHead(make([]byte, 0, responseHeadSize(r.Header, nil)+len(r.Body)), r.Status, r.Header, nil)
	return append(b, r.Body...), nil
}

var errResponseStatus = errors.New("idem: stored response status out of range")

// responseHeadSize bounds the size of appendResponseHead's output.
func responseHeadSize(h http.Header, keep map[string]string) int {
	n := 16
	for k, vs := range h {
		if keep != nil && keepName(keep, k) == "" {
			continue
		}
		n += len(k) + 4
		for _, v := range vs {
			n += len(v) + 2
		}
	}
	return n
}

// keepName returns the canonical name of header k when keep holds it, else
// "". keep maps canonical names to themselves, so a canonical k costs no
// allocation.
func keepName(keep map[string]string, k string) string {
	if c, ok := keep[k]; ok {
		return c
	}
	return keep[http.CanonicalHeaderKey(k)]
}

// appendResponseHead appends the binary form of a StoredResponse without
// its body (the body follows it verbatim) to b: the magic prefix, status
// (100..999, checked by the caller) and the headers of h — with keep
// non-nil, only those keep names, under their canonical names.
func appendResponseHead(b []byte, status int, h http.Header, keep map[string]string) []byte {
	b = append(b, responseMagic[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(status))
	countAt := len(b)
	if keep == nil || len(keep) >= 0x80 {
		// The count first: it may take more than one byte.
		count := len(h)
		if keep != nil {
			count = 0
			for k := range h {
				if keepName(keep, k) != "" {
					count++
				}
			}
		}
		b = binary.AppendUvarint(b, uint64(count))
		countAt = -1
	} else {
		b = append(b, 0) // fewer than 0x80 kept names: a one-byte count, set below
	}
	count := 0
	for k, vs := range h {
		if keep != nil {
			if k = keepName(keep, k); k == "" {
				continue
			}
		}
		count++
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	if countAt >= 0 {
		b[countAt] = byte(count)
	}
	return b
}

// UnmarshalBinary decodes what MarshalBinary encoded. The body aliases b.
// Anything else is an error, never a panic.
func (r *StoredResponse) UnmarshalBinary(b []byte) error {
	status, fields, body, err := scanResponse(b)
	if err != nil {
		return err
	}
	var h http.Header
	if fields.left > 0 {
		h = make(http.Header, fields.left)
	}
	for fields.left > 0 {
		name, nvals := fields.field()
		vals := make([]string, 0, nvals)
		for range nvals {
			vals = append(vals, string(fields.value()))
		}
		h[string(name)] = vals
	}
	*r = StoredResponse{Status: status, Header: h, Body: body}
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

// replayResponse writes the stored response plain (the binary form of
// MarshalBinary) to w: the headers keep names, Idempotent-Replayed: true,
// the status and the body, as UnmarshalBinary followed by copying the kept
// headers would, with two allocations for all header values. Nothing is
// written when plain does not decode; the error is then errResponseFormat.
func replayResponse(w http.ResponseWriter, plain []byte, keep map[string]string) (status int, err error) {
	status, fields, body, err := scanResponse(plain)
	if err != nil {
		return 0, err
	}
	// The kept values: counted and concatenated into one string, then
	// sliced into one []string.
	nvals, size := 0, 0
	for it := fields; it.left > 0; {
		name, nv := it.field()
		kept := keepName(keep, string(name)) != ""
		for range nv {
			if v := it.value(); kept {
				nvals, size = nvals+1, size+len(v)
			}
		}
	}
	var sb strings.Builder
	sb.Grow(size)
	for it := fields; it.left > 0; {
		name, nv := it.field()
		kept := keepName(keep, string(name)) != ""
		for range nv {
			if v := it.value(); kept {
				sb.Write(v)
			}
		}
	}
	all, off := sb.String(), 0
	vals := make([]string, 0, nvals+1)
	dst := w.Header()
	for it := fields; it.left > 0; {
		name, nv := it.field()
		k := keepName(keep, string(name))
		from := len(vals)
		for range nv {
			if v := it.value(); k != "" {
				vals = append(vals, all[off:off+len(v)])
				off += len(v)
			}
		}
		if k != "" {
			dst[k] = vals[from:len(vals):len(vals)]
		}
	}
	vals = append(vals, "true")
	dst[HeaderReplayed] = vals[len(vals)-1:]
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return status, nil
}

// responseFields walks the header fields of a response that scanResponse
// checked: field, then value for each of its values, while left > 0.
type responseFields struct {
	b    []byte
	left uint64 // fields not yet walked
}

// field returns the next field's name and value count.
func (f *responseFields) field() (name []byte, nvals uint64) {
	f.left--
	name, f.b, _ = chunk(f.b)
	nvals, f.b, _ = uvarint(f.b)
	return name, nvals
}

// value returns the current field's next value.
func (f *responseFields) value() []byte {
	v, rest, _ := chunk(f.b)
	f.b = rest
	return v
}

// scanResponse checks the whole binary form of a response and returns its
// status, its header fields to walk and its body; anything that is not
// what MarshalBinary writes is errResponseFormat.
func scanResponse(b []byte) (status int, fields responseFields, body []byte, err error) {
	if len(b) < len(responseMagic)+2 || [3]byte(b[:3]) != responseMagic {
		return 0, fields, nil, errResponseFormat
	}
	b = b[3:]
	status = int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if status < 100 || status > 999 {
		return 0, fields, nil, errResponseFormat
	}
	count, b, ok := uvarint(b)
	if !ok || count > uint64(len(b)) {
		return 0, fields, nil, errResponseFormat
	}
	fields = responseFields{b: b, left: count}
	for range count {
		var nv uint64
		if _, b, ok = chunk(b); !ok {
			return 0, fields, nil, errResponseFormat
		}
		if nv, b, ok = uvarint(b); !ok || nv > uint64(len(b))+1 {
			return 0, fields, nil, errResponseFormat
		}
		for range nv {
			if _, b, ok = chunk(b); !ok {
				return 0, fields, nil, errResponseFormat
			}
		}
	}
	return status, fields, b, nil
}
