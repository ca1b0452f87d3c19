package consolecmd

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/decision"
	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
)

// TestDemoHandlesDecisionEvents: in "console demo", an operator's
// confirmation of a pending payment reaches the shop's decision worker,
// which handles it once (its record in scope unstuck.decision completed)
// and its job completes.
func TestDemoHandlesDecisionEvents(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "demo.db")
	base := consoletest.StartDemo(t, run, "sqlite:"+path)

	order := consoletest.Call(t, "POST", base+"/shop/orders", `"events-order-000001"`, `{"sku":"lamp","qty":1}`)
	require.Equal(t, http.StatusCreated, order.Status, order.Body)
	body := fmt.Sprintf(`{"order_id":%q,"amount_cents":1999}`, order.JSON["id"])
	lost := consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", `"events-payment-00001"`, body)
	require.Equal(t, http.StatusAccepted, lost.Status, lost.Body)

	oncall := consoletest.SignIn(t, base, "oncall", demoPassword("oncall"))
	resp, _ := oncall.Do(t, http.MethodPost, "/search", url.Values{"q": {"events-payment-00001"}}, "")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	keyPath := resp.Header.Get("Location")
	id, err := strconv.ParseInt(strings.TrimPrefix(keyPath, "/keys/"), 10, 64)
	require.NoError(t, err, keyPath)

	db, err := idemsqlite.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	records := idemsqlite.New(db)
	rec, ok, err := records.KeyByID(t.Context(), id)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, idemdriver.StatusPending, rec.Status)

	_, page := oncall.Do(t, http.MethodGet, keyPath, nil, "")
	m := regexp.MustCompile(`action="` + regexp.QuoteMeta(keyPath+"/confirm") + `">[\s\S]*?name="form_key" value="([^"]+)"`).FindStringSubmatch(page)
	require.Len(t, m, 2, "the key's page offers confirm")
	resp, page = oncall.Do(t, http.MethodPost, keyPath+"/confirm", url.Values{"version": {strconv.FormatInt(rec.Version, 10)},
		"reason": {"the provider's dashboard shows the charge"}, "outcome": {"happened"}, "external_ref": {"ch_events_1"}, "form_key": {m[1]}}, "")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, page)

	var eventID string
	require.Eventually(t, func() bool {
		var state string
		err := db.QueryRowContext(t.Context(), `SELECT state, json_extract(json(args), '$.id') FROM river_job WHERE kind = ?`, decision.Kind).Scan(&state, &eventID)
		return err == nil && state == "completed"
	}, 30*time.Second, 100*time.Millisecond, "the shop's worker handled the event")
	handled, ok, err := records.Get(t.Context(), idemdriver.Ident{Scope: decision.DefaultScope, Operation: idem.DefaultOperation,
		KeyDigest: idem.Digest(decision.DefaultScope, idem.DefaultOperation, eventID)})
	require.NoError(t, err)
	require.True(t, ok, "handled through the shop's engine")
	require.Equal(t, idemdriver.StatusCompleted, handled.Status)
}
