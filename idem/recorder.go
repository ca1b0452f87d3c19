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

	own      http.Header // buffered mode: the handler's header map
	header   http.Header // snapshot at WriteHeader
	status   int
	wrote    bool
	buf      bytes.Buffer // the stored copy, at most limit bytes
	all      bytes.Buffer // buffered mode: the whole body
	overflow bool         // the body went past limit
	streamed bool         // Flush or Hijack was used
}

func newRecorder(w http.ResponseWriter, limit int, buffered bool) *recorder {
	r := &recorder{w: w, limit: limit, buffered: buffered}
	if buffered {
		r.own = http.Header{}
	}
	return r
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
	r.header = r.Header().Clone()
	if !r.buffered {
		r.w.WriteHeader(code)
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	if !r.overflow {
		if r.buf.Len()+len(p) > r.limit {
			r.overflow = true
			r.buf.Reset()
		} else {
			r.buf.Write(p)
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

// storedHeader is the header as sent: the snapshot at WriteHeader, or the
// current header of a handler that wrote nothing (net/http sends 200 with
// it when the handler returns).
func (r *recorder) storedHeader() http.Header {
	if !r.wrote {
		return r.Header()
	}
	return r.header
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
