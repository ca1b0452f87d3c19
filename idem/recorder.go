package idem

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
)

// recorder captures a handler's response for storage. In pass-through mode
// the response goes to the client as it is written; in buffered mode
// (transactional) nothing reaches the client until deliver.
type recorder struct {
	w        http.ResponseWriter
	buffered bool
	limit    int
	keep     map[string]string // the replayed headers' canonical names

	own      http.Header // buffered mode: the handler's header map
	status   int
	wrote    bool
	env      []byte       // sealRoom bytes, the response's binary head at WriteHeader, then its body (at most limit bytes)
	bodyAt   int          // where the body starts in env
	all      bytes.Buffer // buffered mode: the whole body
	overflow bool         // the body went past limit
	streamed bool         // Flush or Hijack was used
}

// newRecorder returns a recorder that stores the headers of keep. buf is
// where the stored copy starts (its capacity is used, none of its bytes).
func newRecorder(w http.ResponseWriter, limit int, buffered bool, keep map[string]string, buf []byte) *recorder {
	r := &recorder{}
	r.init(w, limit, buffered, keep, buf)
	return r
}

func (r *recorder) init(w http.ResponseWriter, limit int, buffered bool, keep map[string]string, buf []byte) {
	*r = recorder{w: w, limit: limit, buffered: buffered, keep: keep, env: buf[:0]}
	if buffered {
		r.own = http.Header{}
	}
}

// head starts the stored copy: room for the seal, then the binary head of
// the response with the kept headers of h as they are now.
func (r *recorder) head(status int, h http.Header) {
	r.env = append(r.env[:0], make([]byte, sealRoom)...)
	r.env = appendResponseHead(r.env, status, h, r.keep)
	r.bodyAt = len(r.env)
}

func (r *recorder) Header() http.Header {
	if r.buffered {
		return r.own
	}
	return r.w.Header()
}

func (r *recorder) WriteHeader(code int) {
	if r.wrote {
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		if !r.buffered {
			r.w.WriteHeader(code) // informational: passes, not recorded
		}
		return
	}
	r.wrote, r.status = true, code
	if code <= 999 {
		r.head(code, r.Header())
	}
	if !r.buffered {
		r.w.WriteHeader(code)
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	if !r.overflow {
		if len(r.env)-r.bodyAt+len(p) > r.limit {
			r.overflow = true
			r.env = nil
		} else {
			r.env = append(r.env, p...)
		}
	}
	if r.buffered {
		return r.all.Write(p)
	}
	return r.w.Write(p)
}

// Flush sends what was written so far: the response is streamed and will
// not be stored (SPEC H13). In buffered mode nothing can be sent before the
// commit, so Flush does nothing and the response stays storable.
func (r *recorder) Flush() {
	if r.buffered {
		return
	}
	r.streamed = true
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	if f, ok := r.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands the connection to the handler; the response is not stored.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if r.buffered {
		return nil, nil, http.ErrNotSupported
	}
	h, ok := r.w.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	r.streamed = true
	return h.Hijack()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// stored returns the response as stored: sealRoom bytes of room, then its
// binary form (see [StoredResponse.MarshalBinary]) with the kept headers
// as sent: at WriteHeader, or now for a handler that wrote nothing
// (net/http sends 200 with them when the handler returns). It fails for a
// status outside 100..999.
func (r *recorder) stored() ([]byte, error) {
	if !r.wrote {
		r.head(http.StatusOK, r.Header())
	}
	if s := r.statusCode(); s < 100 || s > 999 {
		return nil, errResponseStatus
	}
	return r.env, nil
}

func (r *recorder) statusCode() int {
	if !r.wrote {
		return http.StatusOK
	}
	return r.status
}

// deliver sends a buffered response to the client.
func (r *recorder) deliver() {
	dst := r.w.Header()
	for k, v := range r.own {
		dst[k] = v
	}
	r.w.WriteHeader(r.statusCode())
	_, _ = r.w.Write(r.all.Bytes())
}
