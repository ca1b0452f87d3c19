package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/incident"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// IncidentStore reads the snapshots of trends and incident groups (a
// *store.DB); the snapshotter of package incident writes them.
type IncidentStore interface {
	IncidentGroups(ctx context.Context, limit int) ([]store.IncidentGroup, error)
	IncidentGroup(ctx context.Context, key string) (store.IncidentGroup, bool, error)
	IncidentHours(ctx context.Context, since time.Time) (map[string]map[time.Time]int64, error)
	IncidentTotals(ctx context.Context) ([]store.IncidentTotal, error)
	LastSnapshot(ctx context.Context) (time.Time, bool, error)
	Trends(ctx context.Context, res store.Resolution, since time.Time) ([]store.TrendSample, error)
}

// operationIterator is what a group's item page reads of the operations
// (the saga driver's admin contract).
type operationIterator interface {
	ReadOperation(ctx context.Context, id string, maxEvents int) (sagadriver.OperationDetail, error)
	EachOperation(ctx context.Context, f sagadriver.OperationFilter, batchSize int, fn func([]sagadriver.Operation) error) error
}

// maxItemScan bounds the records a group's item page reads to find its
// items, and maxItems the items it lists.
const (
	maxItemScan = incident.DefaultScanCap
	maxItems    = idemdriver.MaxLimit
)

// hourly returns the counts of hours per hour over the 24 hours up to
// now, oldest first; an hour without a snapshot counts 0.
func hourly(hours map[time.Time]int64, now time.Time) []int64 {
	start := now.Truncate(time.Hour).Add(-23 * time.Hour)
	out := make([]int64, 24)
	for i := range out {
		out[i] = hours[start.Add(time.Duration(i)*time.Hour)]
	}
	return out
}

// incidentVMs builds the groups' view models: their links, and whether
// the list of their state and operation is exactly the group.
func incidentVMs(p views.Page, groups []store.IncidentGroup, hours map[string]map[time.Time]int64, now time.Time) []views.IncidentVM {
	shared := map[[3]string]int{}
	for _, g := range groups {
		shared[[3]string{g.Kind, g.State, g.Operation}]++
	}
	out := make([]views.IncidentVM, 0, len(groups))
	for _, g := range groups {
		vm := views.IncidentVM{Key: g.Key, Kind: g.Kind, State: g.State, Operation: g.Operation, Step: g.Step, Class: g.Class,
			Message: g.Message, System: g.System, Sample: g.Sample, Count: g.Count, Exact: g.Exact, FirstSeen: g.FirstSeen,
			LastSeen: g.LastSeen, ItemsURL: "/incidents/" + g.Key}
		pts := hourly(hours[g.Key], now)
		pts[len(pts)-1] = g.Count // the current hour: the latest snapshot's count
		vm.Spark = views.Spark{Points: pts, Label: views.TrendLabel(g.Kind+"s "+g.State+" in this group", pts, "24 h")}
		vm.ListExact = shared[[3]string{g.Kind, g.State, g.Operation}] == 1
		q := url.Values{}
		listPath, bulkPath, bulkKind := "/keys", "/keys/bulk", ops.BulkKeys
		if g.Kind == incident.KindOperation {
			listPath, bulkPath, bulkKind = "/operations", "/operations/bulk", ops.BulkOperations
			q.Set("status", g.State)
			q.Set("type", g.Operation)
		} else {
			q.Set("state", g.State)
			q.Set("operation", g.Operation)
		}
		vm.ListURL = listURL(listPath, q)
		// A group's bulk selects exactly its items (the group filter),
		// whether or not another group shares its list.
		if p.BulkEnabled && mayBulk(p.Viewer, bulkKind) {
			// The preview of the action that settles the group without a
			// guess: ask the provider about keys (or confirm each with its
			// own reference where the console cannot ask), retry
			// operations. The preview says which items it is not legal
			// for, and links the group's other actions.
			bq := url.Values{}
			for k, v := range q {
				bq[k] = v
			}
			bq.Set("group", g.Key)
			switch {
			case bulkKind == ops.BulkOperations:
				bq.Set("action", string(ops.OperationRetry))
			case p.VerifyEnabled:
				bq.Set("action", ops.BulkVerify)
			default:
				bq.Set("action", ops.BulkConfirmHappened)
			}
			vm.BulkURL = listURL(bulkPath, bq)
		}
		out = append(out, vm)
	}
	return out
}

// mayBulk reports whether v may take some bulk action on kind: a role acts
// in bulk only where it may act on one item.
func mayBulk(v *views.Viewer, kind string) bool {
	if v == nil || v.Can == nil {
		return false
	}
	for _, a := range bulkActions[kind] {
		if v.Can(singlePath(kind, a[0]), http.MethodPost) {
			return true
		}
	}
	return false
}

func handleIncidents(st IncidentStore, now func() time.Time, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		page := pageFor(r, "Incidents", "incidents")
		t := now().UTC()
		// The three reads at once.
		var (
			groups []store.IncidentGroup
			hours  map[string]map[time.Time]int64
			at     time.Time
			ok     bool
		)
		err := concurrently(
			func() (err error) { groups, err = st.IncidentGroups(ctx, 0); return err },
			func() (err error) {
				hours, err = st.IncidentHours(ctx, t.Truncate(time.Hour).Add(-23*time.Hour))
				return err
			},
			func() (err error) { at, ok, err = st.LastSnapshot(ctx); return err })
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		vm := views.IncidentsVM{Groups: incidentVMs(page, groups, hours, t)}
		if ok {
			vm.AsOf = at
		}
		var n int64
		for _, g := range groups {
			n += g.Count
		}
		if n > 0 {
			page.Title = "(" + strconv.FormatInt(n, 10) + ") Incidents"
		}
		if apiRequest(r) {
			writeJSON(w, http.StatusOK, incidentsOf(vm))
			return
		}
		render(w, r, http.StatusOK, page, views.Incidents(page, vm))
	})
}

// handleIncidentItems lists exactly the items of one group: the records
// of its state and operation whose group is this one, read through the
// admin contracts, newest first, at most maxItems of the first
// maxItemScan read.
func handleIncidentItems(st IncidentStore, keys idemdriver.Admin, sagas operationIterator, now func() time.Time, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		key := chi.URLParam(r, "key")
		if !incident.ValidKey(key) {
			writeError(w, r, log, appError(ENotFound, "There is no such incident group."))
			return
		}
		g, ok, err := st.IncidentGroup(ctx, key)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		if !ok {
			writeError(w, r, log, appError(ENotFound, "There is no such incident group (groups gone for a week are forgotten)."))
			return
		}
		page := pageFor(r, "Incident", "incidents")
		// Whether the list is the group exactly depends on the others.
		all, err := st.IncidentGroups(ctx, 0)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		all = append(slices.DeleteFunc(all, func(x store.IncidentGroup) bool { return x.Key == g.Key }), g)
		vms := incidentVMs(page, all, nil, now().UTC())
		vm := views.IncidentItemsVM{Group: vms[len(vms)-1]}
		if at, ok, err := st.LastSnapshot(ctx); err != nil {
			writeError(w, r, log, err)
			return
		} else if ok {
			vm.AsOf = at
		}
		if g.Kind == incident.KindOperation {
			vm.Ops, vm.Scanned, vm.Capped, err = operationItems(ctx, sagas, g)
		} else {
			vm.Keys, vm.Scanned, vm.Capped, err = keyItems(ctx, keys, g)
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		render(w, r, http.StatusOK, page, views.IncidentItems(page, vm))
	})
}

// errEnough stops an item search.
var errEnough = errors.New("enough items")

// scanItems runs iterate (an EachKey or EachOperation) and keeps the
// records match accepts, reading at most maxItemScan and keeping at most
// maxItems; capped tells that it stopped early.
func scanItems[T any](iterate func(fn func([]T) error) error, match func(T) (bool, error)) (items []T, scanned int, capped bool, err error) {
	err = iterate(func(batch []T) error {
		for _, x := range batch {
			if scanned >= maxItemScan {
				capped = true
				return errEnough
			}
			scanned++
			ok, err := match(x)
			if err != nil {
				return err
			}
			if ok {
				items = append(items, x)
				if len(items) >= maxItems {
					capped = true
					return errEnough
				}
			}
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return items, scanned, capped, err
}

func keyItems(ctx context.Context, keys idemdriver.Admin, g store.IncidentGroup) ([]idemdriver.Record, int, bool, error) {
	f := incident.KeyStateFilter(g.State)
	f.Operation = g.Operation
	return scanItems(func(fn func([]idemdriver.Record) error) error { return keys.EachKey(ctx, f, idemdriver.MaxLimit, fn) },
		func(rec idemdriver.Record) (bool, error) {
			fl, ok := incident.KeyFields(rec)
			return ok && fl.Key() == g.Key, nil
		})
}

func operationItems(ctx context.Context, sagas operationIterator, g store.IncidentGroup) ([]sagadriver.Operation, int, bool, error) {
	if sagas == nil {
		return nil, 0, false, nil
	}
	systems := incident.SystemCache{Ops: sagas}
	f := sagadriver.OperationFilter{Status: sagadriver.Status(g.State), Type: g.Operation}
	return scanItems(func(fn func([]sagadriver.Operation) error) error {
		return sagas.EachOperation(ctx, f, sagadriver.MaxLimit, fn)
	},
		func(op sagadriver.Operation) (bool, error) {
			if op.CurrentStep != g.Step {
				return false, nil
			}
			sys, err := systems.System(ctx, op)
			if err != nil {
				return false, err
			}
			fl, ok := incident.OperationFields(op, sys)
			return ok && fl.Key() == g.Key, nil
		})
}

// overviewTrends fills the overview's sparklines from the snapshots: 24 h
// of quarter-hour counts, 7 d of hourly ones (each the period's highest).
func overviewTrends(ctx context.Context, st IncidentStore, now time.Time, vm *views.OverviewVM) error {
	const bucket = 15 * time.Minute
	dayStart := now.Add(-24 * time.Hour).Truncate(bucket).Add(bucket)
	weekStart := now.Add(-7 * 24 * time.Hour).Truncate(time.Hour).Add(time.Hour)
	day, err := st.Trends(ctx, store.TrendQuarter, dayStart)
	if err != nil {
		return err
	}
	week, err := st.Trends(ctx, store.TrendHour, weekStart)
	if err != nil {
		return err
	}
	series := func(samples []store.TrendSample, kind, state string, start time.Time, step time.Duration, n int) []int64 {
		var out []int64
		at := map[time.Time]int64{}
		for _, s := range samples {
			if s.Kind == kind && s.State == state {
				at[s.At] = s.Count
			}
		}
		if len(at) == 0 {
			return nil
		}
		last := int64(0)
		seen := false
		for i := range n {
			v, ok := at[start.Add(time.Duration(i)*step)]
			if ok {
				last, seen = v, true
			}
			if seen {
				out = append(out, last) // a gap keeps the last count
			}
		}
		return out
	}
	build := func(kind string, states []string) []views.TrendVM {
		var out []views.TrendVM
		for _, st := range states {
			d := series(day, kind, st, dayStart, bucket, int(24*time.Hour/bucket))
			wk := series(week, kind, st, weekStart, time.Hour, 7*24)
			if d == nil && wk == nil {
				continue
			}
			out = append(out, views.TrendVM{Kind: kind, State: st,
				Day:  views.Spark{Points: d, Label: views.TrendLabel(st, d, "24 h")},
				Week: views.Spark{Points: wk, Label: views.TrendLabel(st, wk, "7 d")}})
		}
		return out
	}
	keyStates := []string{"stuck"}
	for _, s := range idemdriver.Statuses {
		keyStates = append(keyStates, string(s))
	}
	vm.KeyTrends = build(incident.KindKey, keyStates)
	var opStates []string
	for _, s := range sagadriver.Statuses {
		opStates = append(opStates, string(s))
	}
	vm.OperationTrends = build(incident.KindOperation, opStates)
	return nil
}

// incidentCollector exports the incident groups' counts as gauges (SPEC
// G10, K18): label values are only the kind and the exactness, never a
// message, so the series stay four.
type incidentCollector struct {
	st     IncidentStore
	log    *slog.Logger
	groups *prometheus.Desc
	items  *prometheus.Desc
}

func newIncidentCollector(st IncidentStore, log *slog.Logger) *incidentCollector {
	return &incidentCollector{st: st, log: log,
		groups: prometheus.NewDesc("unstuck_incident_groups", "Incident groups at the latest snapshot, per kind (key or operation).", []string{"kind"}, nil),
		items: prometheus.NewDesc("unstuck_incident_items", `Items in incident groups at the latest snapshot, per kind; exact="false" marks a lower bound (a capped scan).`,
			[]string{"kind", "exact"}, nil)}
}

func (c *incidentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.groups
	ch <- c.items
}

func (c *incidentCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	totals, err := c.st.IncidentTotals(ctx)
	if err != nil {
		c.log.Warn("metrics: incident totals failed", "error", err.Error())
		return
	}
	for _, kind := range []string{incident.KindKey, incident.KindOperation} {
		t := store.IncidentTotal{Kind: kind, Exact: true}
		for _, x := range totals {
			if x.Kind == kind {
				t = x
			}
		}
		ch <- prometheus.MustNewConstMetric(c.groups, prometheus.GaugeValue, float64(t.Groups), kind)
		ch <- prometheus.MustNewConstMetric(c.items, prometheus.GaugeValue, float64(t.Items), kind, strconv.FormatBool(t.Exact))
	}
}
