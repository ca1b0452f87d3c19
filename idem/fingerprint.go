package idem

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
)

// ErrBodyTooLarge means a request body is larger than the limit given to
// [Fingerprint]; the middleware answers 413.
var ErrBodyTooLarge = errors.New("idem: request body too large")

// ErrMalformedBody means a multipart/form-data body (or its boundary) cannot
// be parsed, so it has no fingerprint; the middleware answers 400.
var ErrMalformedBody = errors.New("idem: malformed request body")

// Fingerprint returns the hex SHA-256 fingerprint of an HTTP request (SPEC H6)
// and the body bytes it read; the caller puts the body back
// (r.Body = io.NopCloser(bytes.NewReader(body))) so the handler still reads
// the whole body. Fingerprint neither closes nor replaces r.Body.
//
// maxBody (> 0) bounds how much is read: a larger body → an error matching
// [ErrBodyTooLarge], with the body partly consumed and no bytes returned. A
// nil r.Body is an empty body.
//
// The hash covers, each part length-prefixed so that no two requests encode
// alike:
//   - the method, as sent (methods are case-sensitive);
//   - the raw path, r.URL.EscapedPath(), so /a%2Fb and /a/b differ;
//   - the raw query, r.URL.RawQuery, unsorted and undecoded ("/p?" and "/p"
//     are the same request);
//   - the Content-Type in a canonical form: its media type parsed with
//     mime.ParseMediaType, type/subtype and parameter names lowercased,
//     parameters sorted, the charset value lowercased (charsets are
//     case-insensitive) and other values kept as sent — so
//     `Application/JSON; Charset="UTF-8"` and `application/json; charset=utf-8`
//     agree, while another charset differs. A missing Content-Type is empty;
//     one that does not parse (several field lines never do) or cannot be
//     formatted again is hashed verbatim, with the raw body, even if it
//     names multipart/form-data;
//   - the SHA-256 of the raw body: every byte counts, so JSON with other
//     whitespace or key order is another request.
//
// For multipart/form-data the boundary parameter and the raw body are left
// out; instead the parts are hashed in order, each with its form name, its
// canonical Content-Type and: for a file part (one whose Content-Disposition
// has a filename parameter) the client file name as sent, the size and the
// SHA-256 of the content; for a field part the SHA-256 of its value.
// Preamble and epilogue are ignored. So the same form sent with another
// boundary has the same fingerprint, while a change of any field, file name,
// file content or the order of parts changes it. Part bodies are read as the
// handler's r.ParseMultipartForm reads them (quoted-printable decoded).
// A body that is not valid multipart (including one cut short before its
// close delimiter), has no part, has no boundary, or has a part whose
// Content-Disposition does not parse → an error matching [ErrMalformedBody].
func Fingerprint(r *http.Request, maxBody int64) (fp string, body []byte, err error) {
	if maxBody <= 0 {
		return "", nil, fmt.Errorf("idem: fingerprint: maxBody %d must be positive", maxBody)
	}
	if r.Body != nil {
		body, err = readBody(r.Body, r.ContentLength, maxBody)
		if err != nil {
			return "", nil, fmt.Errorf("idem: fingerprint: read body: %w", err)
		}
		if int64(len(body)) > maxBody {
			return "", nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, maxBody)
		}
	}

	ct := strings.Join(r.Header.Values("Content-Type"), ", ")
	if simpleMediaType(ct) {
		return simpleFingerprint(r, ct, body), body, nil
	}
	fw := fingerprintWriter{buf: appendRequestParts(make([]byte, 0, 512), r)}
	mediaType, params, perr := mime.ParseMediaType(ct)
	if perr == nil && mediaType == "multipart/form-data" {
		boundary := params["boundary"]
		if boundary == "" {
			return "", nil, fmt.Errorf("%w: multipart/form-data without a boundary", ErrMalformedBody)
		}
		delete(params, "boundary")
		fw.mediaType(ct, mediaType, params, nil)
		if err := fw.multipart(body, boundary); err != nil {
			return "", nil, err
		}
		return fw.hex(), body, nil
	}
	fw.mediaType(ct, mediaType, params, perr)
	fw.str("body")
	bodySum := sha256.Sum256(body)
	fw.sum(bodySum[:])
	return fw.hex(), body, nil
}

// readBodyHintMax caps the buffer readBody allocates up front on the word
// of a Content-Length: a client that declares a large body and sends little
// does not get a large allocation for it.
const readBodyHintMax = 64 << 10

// readBody reads r to its end, or to max+1 bytes, as
// io.ReadAll(io.LimitReader(r, max+1)) does. A positive length hint (the
// request's Content-Length) sizes the buffer up front, so a body that
// matches its Content-Length is read into one allocation.
func readBody(r io.Reader, hint, max int64) ([]byte, error) {
	size := int64(512)
	if hint > 0 {
		size = min(hint, max, readBodyHintMax) + 1 // +1: room to see EOF (or one byte too many) without growing
	}
	b := make([]byte, 0, size)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow as append does
		}
		room := b[len(b):int(min(int64(cap(b)), max+1))]
		n, err := r.Read(room)
		b = b[:len(b)+n]
		if err == io.EOF { //nolint:errorlint // io.Reader returns a bare io.EOF, as io.ReadAll assumes.
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if int64(len(b)) > max {
			return b, nil
		}
	}
}

// simpleFingerprint is Fingerprint for a Content-Type that is its own
// canonical form ("application/json" and the like): the same bytes as the
// parse-and-format path, without it, hashed from a buffer on the stack.
func simpleFingerprint(r *http.Request, ct string, body []byte) string {
	var stack [512]byte
	b := appendRequestParts(stack[:0], r)
	b = appendPart(b, "canonical")
	b = appendPart(b, ct)
	b = appendPart(b, "body")
	bodySum := sha256.Sum256(body)
	b = appendPart(b, string(bodySum[:]))
	return hexSum(sha256.Sum256(b))
}

// appendRequestParts appends the parts of the fingerprint that come before
// the Content-Type.
func appendRequestParts(b []byte, r *http.Request) []byte {
	b = appendPart(b, "unstuck/idem/fingerprint/v1")
	b = appendPart(b, r.Method)
	b = appendPart(b, r.URL.EscapedPath())
	return appendPart(b, r.URL.RawQuery)
}

// fingerprintWriter collects length-prefixed parts, hashed at the end in
// one go (the same digest as writing them one by one, without an
// allocation per part).
type fingerprintWriter struct {
	buf []byte
}

func (w *fingerprintWriter) str(s string) {
	w.buf = appendPart(w.buf, s)
}

func (w *fingerprintWriter) sum(s []byte) {
	w.buf = appendPart(w.buf, string(s))
}

func (w *fingerprintWriter) hex() string {
	return hexSum(sha256.Sum256(w.buf))
}

// simpleMediaType reports whether ct is a lowercase type/subtype without
// parameters or spaces: its own canonical form.
func simpleMediaType(ct string) bool {
	slash := strings.IndexByte(ct, '/')
	if slash <= 0 || slash == len(ct)-1 || strings.HasPrefix(ct, "multipart/") {
		return false // multipart needs its boundary: the full path checks it
	}
	for i := 0; i < len(ct); i++ {
		c := ct[i]
		switch {
		case i == slash:
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '!' || c == '#' || c == '$' || c == '&' || c == '^' || c == '_' || c == '.' || c == '+' || c == '-':
		default:
			return false
		}
	}
	return true
}

// mediaType hashes a Content-Type value, given what mime.ParseMediaType made
// of it: a tag, then the canonical form (type and parameter names lowercased
// by ParseMediaType, parameters sorted by mime.FormatMediaType, the charset
// value lowercased) or, when the value does not parse or cannot be formatted
// again, the raw value.
func (w *fingerprintWriter) mediaType(raw, mediaType string, params map[string]string, parseErr error) {
	if raw == "" {
		w.str("none")
		w.str("")
		return
	}
	if parseErr == nil {
		if cs, ok := params["charset"]; ok {
			params["charset"] = strings.ToLower(cs)
		}
		if s := mime.FormatMediaType(mediaType, params); s != "" {
			w.str("canonical")
			w.str(s)
			return
		}
	}
	w.str("verbatim")
	w.str(raw)
}

// multipart hashes a multipart/form-data body part by part.
func (w *fingerprintWriter) multipart(body []byte, boundary string) error {
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	w.str("multipart-form-data")
	parts := 0
	for {
		p, err := mr.NextPart()
		if err == io.EOF { //nolint:errorlint // NextPart returns a bare io.EOF after the last part; a wrapped one means a truncated body.
			break
		}
		if err != nil {
			return fmt.Errorf("%w: multipart part %d: %w", ErrMalformedBody, parts+1, err)
		}
		parts++
		if err := w.part(p); err != nil {
			return fmt.Errorf("%w: multipart part %d: %w", ErrMalformedBody, parts, err)
		}
	}
	if parts == 0 {
		return fmt.Errorf("%w: multipart body without parts", ErrMalformedBody)
	}
	// NextPart also returns a bare io.EOF when the body ends inside a part's
	// header. Parts cannot contain a delimiter, so a body that was read to its
	// close delimiter contains one after the first part.
	if !bytes.Contains(body, []byte("\n--"+boundary+"--")) {
		return fmt.Errorf("%w: multipart body without its close delimiter", ErrMalformedBody)
	}
	w.str("end")
	return nil
}

// part hashes one multipart/form-data part.
func (w *fingerprintWriter) part(p *multipart.Part) error {
	var name, fileName string
	isFile := false
	if cd := p.Header.Get("Content-Disposition"); cd != "" {
		_, params, err := mime.ParseMediaType(cd)
		if err != nil {
			return fmt.Errorf("content-disposition: %w", err)
		}
		name = params["name"]
		fileName, isFile = params["filename"]
	}
	ct := strings.Join(p.Header.Values("Content-Type"), ", ")
	mt, ctParams, ctErr := mime.ParseMediaType(ct)

	content := sha256.New()
	size, err := io.Copy(content, p)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}

	if isFile {
		w.str("file")
		w.str(name)
		w.str(fileName)
		w.mediaType(ct, mt, ctParams, ctErr)
		w.str(strconv.FormatInt(size, 10))
	} else {
		w.str("field")
		w.str(name)
		w.mediaType(ct, mt, ctParams, ctErr)
	}
	w.sum(content.Sum(nil))
	return nil
}
