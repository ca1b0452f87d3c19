package idem

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// formPart is one part of a multipart/form-data test body.
type formPart struct {
	name, fileName, contentType, content string
	file                                 bool
}

// multipartBody encodes parts with the given boundary and returns the body
// and its Content-Type.
func multipartBody(tb testing.TB, boundary string, parts ...formPart) ([]byte, string) {
	tb.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	require.NoError(tb, mw.SetBoundary(boundary))
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		cd := `form-data; name="` + p.name + `"`
		if p.file {
			cd += `; filename="` + p.fileName + `"`
		}
		h.Set("Content-Disposition", cd)
		if p.contentType != "" {
			h.Set("Content-Type", p.contentType)
		}
		w, err := mw.CreatePart(h)
		require.NoError(tb, err)
		_, err = io.WriteString(w, p.content)
		require.NoError(tb, err)
	}
	require.NoError(tb, mw.Close())
	return buf.Bytes(), mw.FormDataContentType()
}

func newFPRequest(method, target, contentType string, body []byte) *http.Request {
	r := httptest.NewRequest(method, target, bytes.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return r
}

func fingerprintOf(t *testing.T, r *http.Request) string {
	t.Helper()
	fp, _, err := Fingerprint(r, 1<<20)
	require.NoError(t, err)
	require.Len(t, fp, 64)
	return fp
}

var testForm = []formPart{
	{name: "amount", content: "1000"},
	{name: "currency", content: "eur"},
	{name: "receipt", file: true, fileName: "receipt.pdf", contentType: "application/pdf", content: "%PDF-1.7 …"},
	{name: "note", content: ""},
}

func TestFingerprintSameRequest(t *testing.T) {
	t.Parallel()
	body := []byte(`{"amount": 1000, "currency": "eur"}`)
	a := fingerprintOf(t, newFPRequest(http.MethodPost, "/charges?expand=customer", "application/json", body))
	b := fingerprintOf(t, newFPRequest(http.MethodPost, "/charges?expand=customer", "application/json", body))
	require.Equal(t, a, b, "H6: the same request twice")

	formA, ctA := multipartBody(t, "boundaryAAAA", testForm...)
	formB, ctB := multipartBody(t, "other-boundary-0123456789", testForm...)
	require.NotEqual(t, formA, formB)
	a = fingerprintOf(t, newFPRequest(http.MethodPost, "/upload", ctA, formA))
	b = fingerprintOf(t, newFPRequest(http.MethodPost, "/upload", ctB, formB))
	require.Equal(t, a, b, "H6: the same form with another boundary")

	// A preamble and an epilogue do not change the form.
	withExtras := append([]byte("preamble\r\n"), formA...)
	withExtras = append(withExtras, "epilogue\r\n"...)
	b = fingerprintOf(t, newFPRequest(http.MethodPost, "/upload", ctA, withExtras))
	require.Equal(t, a, b, "preamble and epilogue")

	// An empty query is no query.
	a = fingerprintOf(t, newFPRequest(http.MethodPost, "/charges?", "application/json", body))
	b = fingerprintOf(t, newFPRequest(http.MethodPost, "/charges", "application/json", body))
	require.Equal(t, a, b, "empty query")

	// Media type and charset are case-insensitive; parameter order is not kept.
	a = fingerprintOf(t, newFPRequest(http.MethodPost, "/x", `text/plain; charset=utf-8; format=flowed`, body))
	b = fingerprintOf(t, newFPRequest(http.MethodPost, "/x", `Text/Plain; Format="flowed"; CHARSET="UTF-8"`, body))
	require.Equal(t, a, b, "canonical Content-Type")
}

func TestFingerprintDiffers(t *testing.T) {
	t.Parallel()
	const (
		method = http.MethodPost
		target = "/charges/a%2Fb?x=1&y=2"
		ct     = "application/json; charset=utf-8"
	)
	body := []byte(`{"amount":1000}`)
	base := fingerprintOf(t, newFPRequest(method, target, ct, body))

	tests := []struct {
		name                   string
		method, target, ct     string
		body                   []byte
		replaceHeader, addLine string
	}{
		{name: "method", method: http.MethodPut, target: target, ct: ct, body: body},
		{name: "path", method: method, target: "/charges/a%2Fc?x=1&y=2", ct: ct, body: body},
		{name: "raw path escaping", method: method, target: "/charges/a/b?x=1&y=2", ct: ct, body: body},
		{name: "query", method: method, target: "/charges/a%2Fb?x=1&y=3", ct: ct, body: body},
		{name: "query order", method: method, target: "/charges/a%2Fb?y=2&x=1", ct: ct, body: body},
		{name: "no query", method: method, target: "/charges/a%2Fb", ct: ct, body: body},
		{name: "content type", method: method, target: target, ct: "text/plain; charset=utf-8", body: body},
		{name: "charset", method: method, target: target, ct: "application/json; charset=latin1", body: body},
		{name: "no content type", method: method, target: target, ct: "", body: body},
		{name: "unparsable content type", method: method, target: target, ct: "application/json;", body: body},
		{name: "two content type lines", method: method, target: target, ct: ct, body: body, addLine: "text/plain"},
		{name: "body", method: method, target: target, ct: ct, body: []byte(`{"amount":1001}`)},
		{name: "body whitespace", method: method, target: target, ct: ct, body: []byte(`{"amount": 1000}`)},
		{name: "empty body", method: method, target: target, ct: ct, body: nil},
	}
	seen := map[string]string{base: "base"}
	for _, tt := range tests {
		r := newFPRequest(tt.method, tt.target, tt.ct, tt.body)
		if tt.addLine != "" {
			r.Header.Add("Content-Type", tt.addLine)
		}
		fp := fingerprintOf(t, r)
		prev, dup := seen[fp]
		require.False(t, dup, "H6: %s gives the fingerprint of %s", tt.name, prev)
		seen[fp] = tt.name
	}
}

func TestFingerprintMultipartDiffers(t *testing.T) {
	t.Parallel()
	fpOf := func(parts ...formPart) string {
		body, ct := multipartBody(t, "b0undary", parts...)
		return fingerprintOf(t, newFPRequest(http.MethodPost, "/upload", ct, body))
	}
	with := func(i int, change func(*formPart)) []formPart {
		parts := append([]formPart(nil), testForm...)
		change(&parts[i])
		return parts
	}
	seen := map[string]string{fpOf(testForm...): "base"}
	variants := []struct {
		name  string
		parts []formPart
	}{
		{"field value", with(0, func(p *formPart) { p.content = "1001" })},
		{"field name", with(0, func(p *formPart) { p.name = "amount2" })},
		{"empty field value", with(1, func(p *formPart) { p.content = "" })},
		{"file name", with(2, func(p *formPart) { p.fileName = "receipt2.pdf" })},
		{"file name path", with(2, func(p *formPart) { p.fileName = "dir/receipt.pdf" })},
		{"file content", with(2, func(p *formPart) { p.content = "%PDF-1.7 …!" })},
		{"file content type", with(2, func(p *formPart) { p.contentType = "application/octet-stream" })},
		{"file form name", with(2, func(p *formPart) { p.name = "receipt2" })},
		{"file to field", with(2, func(p *formPart) { p.file = false })},
		{"field to file", with(3, func(p *formPart) { p.file, p.fileName = true, "note.txt" })},
		{"order", []formPart{testForm[1], testForm[0], testForm[2], testForm[3]}},
		{"part removed", testForm[:3]},
		{"part added", append(append([]formPart(nil), testForm...), formPart{name: "extra"})},
	}
	for _, v := range variants {
		fp := fpOf(v.parts...)
		prev, dup := seen[fp]
		require.False(t, dup, "H6: %s gives the fingerprint of %s", v.name, prev)
		seen[fp] = v.name
	}

	// The same form as a raw body of another media type is another request.
	body, ct := multipartBody(t, "b0undary", testForm...)
	mixed := fingerprintOf(t, newFPRequest(http.MethodPost, "/upload", strings.Replace(ct, "form-data", "mixed", 1), body))
	_, dup := seen[mixed]
	require.False(t, dup, "multipart/mixed is hashed raw")
}

func TestFingerprintReturnsBody(t *testing.T) {
	t.Parallel()
	for _, body := range [][]byte{nil, {}, []byte("x"), bytes.Repeat([]byte("0123456789"), 1000)} {
		r := newFPRequest(http.MethodPost, "/", "application/octet-stream", body)
		_, got, err := Fingerprint(r, max(int64(len(body)), 1))
		require.NoError(t, err)
		require.Equal(t, len(body), len(got))
		require.True(t, bytes.Equal(body, got), "H6: the body read is the body sent")
	}

	form, ct := multipartBody(t, "xyz", testForm...)
	_, got, err := Fingerprint(newFPRequest(http.MethodPost, "/upload", ct, form), 1<<20)
	require.NoError(t, err)
	require.Equal(t, form, got)

	// A nil body is an empty body.
	r := &http.Request{Method: http.MethodPost, URL: &url.URL{Path: "/"}, Header: http.Header{}}
	fpNil, got, err := Fingerprint(r, 1)
	require.NoError(t, err)
	require.Empty(t, got)
	require.Equal(t, fingerprintOf(t, newFPRequest(http.MethodPost, "/", "", nil)), fpNil)

	// The handler still reads the whole body after it is put back.
	req := newFPRequest(http.MethodPost, "/upload", ct, form)
	_, body, err := Fingerprint(req, 1<<20)
	require.NoError(t, err)
	req.Body = io.NopCloser(bytes.NewReader(body))
	require.NoError(t, req.ParseMultipartForm(1<<20))
	require.Equal(t, "1000", req.FormValue("amount"))
	fh := req.MultipartForm.File["receipt"]
	require.Len(t, fh, 1)
	require.Equal(t, "receipt.pdf", fh[0].Filename)
}

func TestFingerprintBodyTooLarge(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("a"), 101)
	_, got, err := Fingerprint(newFPRequest(http.MethodPost, "/", "text/plain", body), 100)
	require.ErrorIs(t, err, ErrBodyTooLarge)
	require.Nil(t, got)

	_, got, err = Fingerprint(newFPRequest(http.MethodPost, "/", "text/plain", body), 101)
	require.NoError(t, err, "a body of exactly maxBody bytes")
	require.Equal(t, body, got)

	_, _, err = Fingerprint(newFPRequest(http.MethodPost, "/", "text/plain", body), 0)
	require.ErrorContains(t, err, "maxBody 0 must be positive")
	require.NotErrorIs(t, err, ErrBodyTooLarge)
}

func TestFingerprintMalformedMultipart(t *testing.T) {
	t.Parallel()
	form, ct := multipartBody(t, "b0undary", testForm...)
	tests := []struct {
		name string
		ct   string
		body []byte
	}{
		{"no boundary", "multipart/form-data", form},
		{"wrong boundary", "multipart/form-data; boundary=other", form},
		{"empty body", ct, nil},
		{"truncated in a part", ct, form[:len(form)-18]},
		{"truncated in a part header", ct, form[:len(form)-20]},
		{"truncated after the last part", ct, form[:len(form)-15]},
		{"no closing boundary", ct, form[:bytes.LastIndex(form, []byte("--b0undary--"))]},
		{"garbage", ct, []byte("not multipart at all")},
		{"bad part disposition", ct, []byte("--b0undary\r\nContent-Disposition: form-data; name=\"a\"; name=\"b\"\r\n\r\nx\r\n--b0undary--\r\n")},
		{"bad part header", ct, []byte("--b0undary\r\nno colon here\r\n\r\nx\r\n--b0undary--\r\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fp, body, err := Fingerprint(newFPRequest(http.MethodPost, "/upload", tt.ct, tt.body), 1<<20)
			require.ErrorIs(t, err, ErrMalformedBody)
			require.NotErrorIs(t, err, ErrBodyTooLarge)
			require.Empty(t, fp)
			require.Nil(t, body)
		})
	}
}

// FuzzFingerprint checks Fingerprint on arbitrary requests: it never panics,
// it is deterministic, it returns the body it read, and a multipart/form-data
// body written again with another boundary keeps its fingerprint (SPEC H6).
func FuzzFingerprint(f *testing.F) {
	form, formCT := multipartBody(f, "b0undary", testForm...)
	f.Add("POST", "/upload", formCT, form)
	f.Add("POST", "/charges?x=1", "application/json; charset=utf-8", []byte(`{"a":1}`))
	f.Add("PATCH", "/a%2Fb", "text/plain;charset=UTF-8;format=flowed", []byte("hi"))
	f.Add("GET", "/", "", []byte(nil))
	f.Add("POST", "/", "multipart/form-data", form)
	f.Add("POST", "/", "multipart/form-data; boundary=b0undary", form[:len(form)/2])
	f.Add("POST", "/", "multipart/form-data; boundary=b0undary", []byte("--b0undary\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\na=3Db\r\n--b0undary--"))
	f.Add("POST", "/", "multipart/form-data; boundary=\"a b\"", []byte("--a b\r\nContent-Disposition: form-data; name*=utf-8''%C3%A9; filename=\"\"\r\n\r\n\r\n--a b--\r\n"))
	f.Add("POST", "/", "text/plain; title*=utf-8''%C3%A9", []byte("x"))

	const maxBody = 1 << 16
	f.Fuzz(func(t *testing.T, method, target, contentType string, body []byte) {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		req := func(ct string, b []byte) *http.Request {
			return &http.Request{
				Method: method,
				URL:    u,
				Header: http.Header{"Content-Type": {ct}},
				Body:   io.NopCloser(bytes.NewReader(b)),
			}
		}
		fp1, got1, err1 := Fingerprint(req(contentType, body), maxBody)
		fp2, got2, err2 := Fingerprint(req(contentType, body), maxBody)
		require.Equal(t, fp1, fp2, "deterministic")
		require.Equal(t, got1, got2)
		require.Equal(t, err1 == nil, err2 == nil)
		if err1 != nil {
			require.Empty(t, fp1)
			require.Nil(t, got1)
			if len(body) > maxBody {
				require.ErrorIs(t, err1, ErrBodyTooLarge)
			} else {
				require.ErrorIs(t, err1, ErrMalformedBody)
			}
			return
		}
		require.Len(t, fp1, 64)
		require.True(t, bytes.Equal(body, got1), "the body read is the body sent")

		// The same form with another boundary has the same fingerprint.
		rewritten, ct, ok := rewriteMultipart(body, contentType)
		if !ok {
			return
		}
		fp3, _, err := Fingerprint(req(ct, rewritten), 1<<20)
		require.NoError(t, err, "rewritten as %q", ct)
		require.Equal(t, fp1, fp3, "another boundary: %q", ct)
	})
}

// rewriteMultipart writes a multipart/form-data body again with a fresh
// boundary, part headers and decoded contents kept. ok is false when the body
// cannot be read back the way Fingerprint reads it.
func rewriteMultipart(body []byte, contentType string) (out []byte, ct string, ok bool) {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil || mediaType != "multipart/form-data" || params["boundary"] == "" {
		return nil, "", false
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for {
		p, err := mr.NextPart()
		if err == io.EOF { //nolint:errorlint // see fingerprintWriter.multipart
			break
		}
		if err != nil {
			return nil, "", false
		}
		content, err := io.ReadAll(p)
		if err != nil {
			return nil, "", false
		}
		if bytes.Contains(content, []byte(mw.Boundary())) {
			return nil, "", false
		}
		w, err := mw.CreatePart(p.Header)
		if err != nil {
			return nil, "", false
		}
		if _, err := w.Write(content); err != nil {
			return nil, "", false
		}
	}
	if err := mw.Close(); err != nil {
		return nil, "", false
	}
	// Keep every other parameter of the original Content-Type.
	params["boundary"] = mw.Boundary()
	ct = mime.FormatMediaType(mediaType, params)
	if ct == "" {
		return nil, "", false // Fingerprint hashes such a Content-Type verbatim
	}
	return buf.Bytes(), ct, true
}
