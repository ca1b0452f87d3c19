package views

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// The list rows are written in Go (rows.go): every value a customer or an
// engine chose must come out escaped, exactly as templ escapes it, and the
// rows must hold the cells the headers name.
func TestListRowsEscapeEveryValue(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	hostile := `<script>alert("x")</script>&'`
	escaped := `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&#39;`

	var sb strings.Builder
	recs := []idemdriver.Record{{ID: 42, Ident: idemdriver.Ident{Scope: hostile, Operation: hostile}, Status: idemdriver.StatusFailed,
		ExternalRef: hostile, Attempts: 3, UpdatedAt: now.Add(-90 * time.Second)},
		{ID: 43, Ident: idemdriver.Ident{Scope: "s", Operation: "o"}, Status: idemdriver.StatusProcessing,
			LeaseExpiresAt: now.Add(-time.Minute), ReadAt: now}}
	if err := keyRows(now, recs).Render(context.Background(), &sb); err != nil {
		t.Fatal(err)
	}
	got := sb.String()
	if strings.Contains(got, "<script") || strings.Count(got, escaped) != 3 {
		t.Fatalf("key rows do not escape every value:\n%s", got)
	}
	for _, want := range []string{
		`<tr><td class="row-id"><a href="/keys/42" aria-label="Key 42">42</a>` + rowMoreHTML + `</td><td><span class="chip chip-failed">failed</span></td>`,
		`<td class="extra" data-label="Scope">` + escaped + `</td>`,
		`<td class="num extra" data-label="Attempts">3</td><td><time datetime="2026-12-01T09:58:30Z" title="2026-12-01 09:58:30Z">1m ago</time></td></tr>`,
		`<span class="chip chip-stuck">stuck</span>`, // processing past its lease
		`<td><span>—</span></td></tr>`, // no update time
	} {
		if !strings.Contains(got, want) {
			t.Errorf("key rows lack %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "<td"); n != 14 {
		t.Errorf("key rows have %d cells, want 7 per row", n)
	}

	sb.Reset()
	ops := []sagadriver.Operation{{ID: `op/1?"<b>`, Type: hostile, Status: sagadriver.StatusReviewRequired, CurrentStep: hostile,
		CorrelationID: hostile, ReviewReason: "compensation failed", LastError: hostile, Resolution: "x", UpdatedAt: now}}
	if err := operationRows(now, ops).Render(context.Background(), &sb); err != nil {
		t.Fatal(err)
	}
	got = sb.String()
	if strings.Contains(got, "<script") || strings.Contains(got, "<b>") || strings.Count(got, escaped) != 4 {
		t.Fatalf("operation rows do not escape every value:\n%s", got)
	}
	for _, want := range []string{
		`<a href="/operations/op%2F1%3F%22%3Cb%3E"><code>op/1?&#34;&lt;b&gt;</code></a>`,
		`data-copy="op/1?&#34;&lt;b&gt;" aria-label="Copy operation ID op/1?&#34;&lt;b&gt;">Copy</button>` + rowMoreHTML,
		`<td class="extra" data-label="Correlation ID">` + escaped + `</td>`,
		`<span class="chip chip-review_required">review_required</span><br/>` + resolvedManuallyHTML,
		`<td>compensation failed: ` + escaped + `</td>`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("operation rows lack %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "<td"); n != 7 {
		t.Errorf("operation rows have %d cells, want 7", n)
	}
}

// Time's title is the datetime's date and time in UTC, whatever the
// time's zone, and a year outside 0–9999 is formatted, not copied.
func TestTimeTitle(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2026, 12, 1, 11, 58, 30, 123456789, time.FixedZone("CET", 3600)),
			`<time datetime="2026-12-01T10:58:30.123456789Z" title="2026-12-01 10:58:30Z">in 58m</time>`},
		{time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC),
			`<time datetime="2026-11-30T23:00:00Z" title="2026-11-30 23:00:00Z">11h ago</time>`},
		{time.Date(12026, 1, 2, 3, 4, 5, 0, time.UTC),
			`<time datetime="12026-01-02T03:04:05Z" title="12026-01-02 03:04:05Z">in 106751d</time>`}, // Sub saturates
		{time.Time{}, `<span>—</span>`},
	} {
		if got := string(appendTime(nil, now, c.t)); got != c.want {
			t.Errorf("appendTime(%v) = %s, want %s", c.t, got, c.want)
		}
	}
}
