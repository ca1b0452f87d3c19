package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// TracePlaceholder is what a trace link template holds where the trace ID
// goes (console serve --trace-url).
const TracePlaceholder = "{trace_id}"

// ParseTraceURL checks a trace link template: an absolute http or https
// URL with a host that holds TracePlaceholder, such as
// https://tempo.example.com/explore/trace/{trace_id}. "" is no link.
func ParseTraceURL(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if !strings.Contains(s, TracePlaceholder) {
		return "", errors.New("the template must hold " + TracePlaceholder + ", where the trace ID goes")
	}
	u, err := url.Parse(strings.ReplaceAll(s, TracePlaceholder, "0"))
	if err != nil {
		return "", errors.New("not a URL: " + err.Error())
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", errors.New("an absolute http:// or https:// URL is needed")
	}
	return s, nil
}

// traceURLKey is the context key of the trace link template.
type traceURLKey struct{}

// withTraceURL puts the trace link template tpl in every request's
// context, for the pages that link a record's trace.
func withTraceURL(tpl string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), traceURLKey{}, tpl)))
		})
	}
}

// traceLink returns the link to traceID in the tracing UI, "" without a
// template or a trace ID. The ID is escaped as a path segment, which
// also suits a query value.
func traceLink(ctx context.Context, traceID string) string {
	tpl, _ := ctx.Value(traceURLKey{}).(string)
	if tpl == "" || traceID == "" {
		return ""
	}
	return strings.ReplaceAll(tpl, TracePlaceholder, url.PathEscape(traceID))
}
