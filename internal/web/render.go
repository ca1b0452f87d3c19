package web

import (
	"bytes"
	"net/http"
	"sync"
	"time"

	"github.com/a-h/templ"

	"github.com/unstuckhq/unstuck/internal/views"
)

// pageFor builds the layout's model for r.
func pageFor(r *http.Request, title, nav string) views.Page {
	n, bulk := waitingApprovals(r.Context())
	return views.Page{Title: title, Nav: nav, Viewer: viewerFrom(r.Context()), Now: time.Now().UTC(), Approvals: n, BulkEnabled: bulk, VerifyEnabled: verifyOn(r.Context()),
		WebhooksEnabled: webhooksOn(r.Context())}
}

// renderBuffers hold pages while they render: a list page is 20–40 KiB,
// which a new buffer would reach by growing six times.
var renderBuffers = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 32<<10)) }}

// putRenderBuffer returns buf to renderBuffers, unless a page made it
// larger than most pages need.
func putRenderBuffer(buf *bytes.Buffer) {
	if buf.Cap() > 256<<10 {
		return
	}
	buf.Reset()
	renderBuffers.Put(buf)
}

// render writes content inside the layout, or only the named fragments
// when the request comes from HTMX and fragments are given. It renders into
// a buffer first, so a template error becomes a clean 500.
func render(w http.ResponseWriter, r *http.Request, status int, p views.Page, content templ.Component, fragments ...any) {
	buf := renderBuffers.Get().(*bytes.Buffer)
	defer putRenderBuffer(buf)
	var err error
	if len(fragments) > 0 && r.Header.Get("HX-Request") == "true" {
		err = templ.RenderFragments(r.Context(), buf, content, fragments...)
	} else {
		err = views.Layout(p, content).Render(r.Context(), buf)
	}
	if err != nil {
		http.Error(w, "Internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Vary", "HX-Request")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
