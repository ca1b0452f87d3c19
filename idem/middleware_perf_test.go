package idem

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// The fast paths that cut the middleware's overhead must give the
// same answers as the general code they skip (SPEC H2, H6).

// TestPlainSFStringAgreesWithParser: every value the key fast path accepts
// parses, with httpsfv, as a String Item with the same content and no
// parameters, so ParseKeyHeader answers exactly as before (SPEC H2).
func TestPlainSFStringAgreesWithParser(t *testing.T) {
	cases := []string{`""`, `"a"`, `"018f3c2e-7b1a-7000-8000-000000000001"`, `" spaced key value !#$%&'()*+,-./:;<=>?@[]^_{|}~"`,
		`"a\"b"`, `"a\\b"`, `"a"b"`, `"abc";x=1`, `"abc" `, ` "abc"`, `"a`, `a"`, `"é"`, "\"tab\there\"", `abc`, `"`, ``}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "\"\\ ;,=aZ09-_\t~\x7f\x1f"
	for range 20000 {
		var b strings.Builder
		n := rng.IntN(8)
		for range n {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		cases = append(cases, b.String(), `"`+b.String()+`"`)
	}
	accepted := 0
	for _, v := range cases {
		got, ok := plainSFString(v)
		if !ok {
			continue
		}
		accepted++
		item, err := httpsfv.UnmarshalItem([]string{v})
		if err != nil {
			t.Fatalf("plainSFString(%q) = %q, but the parser refuses it: %v", v, got, err)
		}
		if s, isStr := item.Value.(string); !isStr || s != got || len(item.Params.Names()) != 0 {
			t.Fatalf("plainSFString(%q) = %q, parser: %#v %v", v, got, item.Value, item.Params.Names())
		}
	}
	if accepted < 1000 {
		t.Fatalf("only %d values took the fast path", accepted)
	}
	for _, v := range []string{`"a\"b"`, `"abc";x=1`, `"abc" `, `"é"`, "\"tab\there\""} {
		if _, ok := plainSFString(v); ok {
			t.Errorf("plainSFString(%q) took the fast path", v)
		}
	}
}

// TestReadBodyMatchesReadAll: readBody returns what
// io.ReadAll(io.LimitReader(r, max+1)) returns, whatever the Content-Length
// hint says (right, too small, too large, absent) and however the reader
// splits its data (SPEC H6: the fingerprint covers every byte; 413 above
// the limit).
func TestReadBodyMatchesReadAll(t *testing.T) {
	for _, size := range []int{0, 1, 25, 511, 512, 513, 4096, 70000} {
		data := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
		for _, max := range []int64{1, 24, 25, 26, 512, 1 << 20} {
			for _, hint := range []int64{-1, 0, 1, int64(size) - 1, int64(size), int64(size) + 1, 1 << 30} {
				for _, wrap := range []func(io.Reader) io.Reader{
					func(r io.Reader) io.Reader { return r }, iotest.OneByteReader, iotest.DataErrReader, iotest.HalfReader,
				} {
					want, werr := io.ReadAll(io.LimitReader(wrap(bytes.NewReader(data)), max+1))
					got, gerr := readBody(wrap(bytes.NewReader(data)), hint, max)
					if !bytes.Equal(got, want) || (gerr == nil) != (werr == nil) {
						t.Fatalf("size %d max %d hint %d: got %d bytes (%v), want %d (%v)", size, max, hint, len(got), gerr, len(want), werr)
					}
				}
			}
		}
	}
	if _, err := readBody(iotest.ErrReader(io.ErrUnexpectedEOF), 10, 100); err == nil {
		t.Fatal("a read error was lost")
	}
}

// TestReplayResponseMatchesUnmarshal: the replay writes the kept headers
// that UnmarshalBinary decodes, under their canonical names, plus
// Idempotent-Replayed, the status and the body; anything UnmarshalBinary
// refuses is refused with nothing written (SPEC H7, H12, H14 fail closed).
func TestReplayResponseMatchesUnmarshal(t *testing.T) {
	keep := map[string]string{"Content-Type": "Content-Type", "Location": "Location", "Link": "Link"}
	resp := StoredResponse{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Link": {"<a>", "<b>"},
		"Location": {}, "X-Secret": {"no"}, "Set-Cookie": {"s=1"}}, Body: []byte(`{"id":1}`)}
	plain, err := resp.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for cut := 0; cut <= len(plain); cut++ {
		in := plain[:cut]
		var want StoredResponse
		werr := want.UnmarshalBinary(in)
		w := httptest.NewRecorder()
		status, gerr := replayResponse(w, in, keep)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("cut %d: replay error %v, unmarshal error %v", cut, gerr, werr)
		}
		if gerr != nil {
			if len(w.Header()) != 0 || w.Body.Len() != 0 || w.Code != 200 {
				t.Fatalf("cut %d: refused but wrote %v %q", cut, w.Header(), w.Body.Bytes())
			}
			continue
		}
		wantH := http.Header{HeaderReplayed: {"true"}}
		for k, v := range want.Header {
			if keep[k] != "" {
				wantH[k] = v
			}
		}
		if status != want.Status || w.Code != want.Status || !reflect.DeepEqual(w.Header(), wantH) || !bytes.Equal(w.Body.Bytes(), want.Body) {
			t.Fatalf("cut %d: got %d %v %q, want %d %v %q", cut, w.Code, w.Header(), w.Body.Bytes(), want.Status, wantH, want.Body)
		}
	}
}

// TestSealInPlaceOpens: a response sealed in place in the recorder's buffer
// opens to the same bytes, with or without spare capacity for the tag, and
// in plain mode (SPEC H14).
func TestSealInPlaceOpens(t *testing.T) {
	id := idemdriver.Ident{Scope: "ip:192.0.2.1", Operation: "POST /orders", KeyDigest: Digest("ip:192.0.2.1", "POST /orders", "k")}
	plain := []byte("the stored response, binary")
	sealed, err := newSealer(bytes.Repeat([]byte("s"), MinSecretBytes), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*sealer{sealed, {plain: true}} {
		for _, spare := range []int{0, sealOverhead, 100} {
			buf := make([]byte, sealRoom, sealRoom+len(plain)+spare)
			env, err := s.sealInPlace(id, "fp", append(buf, plain...))
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.open(id, "fp", env)
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("plain %v spare %d: opened %q, %v", s.plain, spare, got, err)
			}
			if _, err := s.open(idemdriver.Ident{Scope: "ip:192.0.2.2", Operation: id.Operation, KeyDigest: id.KeyDigest}, "fp", env); err == nil && !s.plain {
				t.Fatal("an envelope opened for another record")
			}
		}
	}
}

// TestAppendResponseHeadKeeps: the head the recorder encodes decodes to the
// kept headers under their canonical names, whether the kept names fit the
// one-byte count (the one-pass path) or not (SPEC H12: only listed headers,
// never Set-Cookie).
func TestAppendResponseHeadKeeps(t *testing.T) {
	for _, n := range []int{0, 1, 9, 0x7f, 0x80, 200} {
		keep := map[string]string{}
		h := http.Header{"Set-Cookie": {"s=1"}, "x-lower": {"v"}}
		want := http.Header{}
		for i := range n {
			k := http.CanonicalHeaderKey(fmt.Sprintf("X-H%d", i))
			keep[k] = k
			h[k] = []string{fmt.Sprint(i), "b"}
			want[k] = h[k]
		}
		if n > 0 {
			keep["X-Lower"] = "X-Lower"
			want["X-Lower"] = []string{"v"}
		}
		b := appendResponseHead(nil, 201, h, keep)
		var got StoredResponse
		if err := got.UnmarshalBinary(append(b, "body"...)); err != nil {
			t.Fatalf("%d kept: %v", n, err)
		}
		if got.Status != 201 || string(got.Body) != "body" || len(got.Header) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got.Header, want)) {
			t.Fatalf("%d kept: got %d %v %q, want %v", n, got.Status, got.Header, got.Body, want)
		}
	}
}

// captureStore answers the first request's Reserve and keeps the Result of
// its Complete, as an in-memory store would; nothing else is implemented.
type captureStore struct {
	idemdriver.Store
	result []byte
}

func (s *captureStore) Reserve(_ context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	now := time.Now()
	return idemdriver.Record{Ident: p.Ident, Fingerprint: p.Fingerprint, Status: idemdriver.StatusProcessing, Owner: idemdriver.Owner{Token: p.Owner, Fence: 1},
		LeaseExpiresAt: now.Add(p.Lease), ReadAt: now, CreatedAt: now, Attempts: 1, Version: 1}, true, nil
}

func (s *captureStore) Complete(_ context.Context, _ idemdriver.Ident, _ idemdriver.Owner, c idemdriver.Completion) error {
	s.result = c.Result
	return nil
}

// TestStoredResultKeepsNoResponseAlive: the sealed result the middleware
// hands to the store may share memory with the request's working block;
// a store that keeps it must not keep the response writer (and through it
// the response) alive once the request is over.
func TestStoredResultKeepsNoResponseAlive(t *testing.T) {
	store := &captureStore{}
	e, err := New(store, Config{Secret: bytes.Repeat([]byte("s"), MinSecretBytes)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMiddleware(e, MiddlewareConfig{})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Required(nil)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":1}`))
	}))
	collected := make(chan struct{})
	func() {
		w := httptest.NewRecorder()
		runtime.AddCleanup(w, func(ch chan struct{}) { close(ch) }, collected)
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"sku":"a"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(keyHeader, `"018f3c2e-7b1a-7000-8000-000000000001"`)
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated || len(store.result) == 0 {
			t.Fatalf("status %d, stored %d bytes", w.Code, len(store.result))
		}
	}()
	for range 50 {
		runtime.GC()
		select {
		case <-collected:
			runtime.KeepAlive(store.result)
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("the response writer is still reachable from the stored result")
}
