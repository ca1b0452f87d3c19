package audit

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestExport(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		b.trail.exportPage = 3 // cross pages with a few entries
		for i := range 8 {
			o := entryOpts{Actor: "ada"}
			if i%2 == 1 {
				o = entryOpts{Actor: "bob", Reason: "=HYPERLINK(\"http://evil\"), \"quoted\"\nsecond line"}
			}
			b.append(t, o)
		}
		all, _, err := b.trail.List(ctx, Filter{})
		require.NoError(t, err)
		require.Len(t, all, 8)

		t.Run("jsonl", func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, b.trail.Export(ctx, Filter{}, &buf, FormatJSONL))
			var got []Entry
			sc := bufio.NewScanner(&buf)
			for sc.Scan() {
				var e Entry
				require.NoError(t, json.Unmarshal(sc.Bytes(), &e), sc.Text())
				require.Equal(t, e.Hash, mustHash(t, e), "an exported entry verifies offline, with the key")
				got = append(got, e)
			}
			require.NoError(t, sc.Err())
			require.Equal(t, all, got, "every entry, newest first, exact")

			var line map[string]any
			first, _, _ := bytes.Cut(mustExport(t, b, Filter{}, FormatJSONL), []byte("\n"))
			require.NoError(t, json.Unmarshal(first, &line))
			require.Equal(t, map[string]any{"status": "released", "version": float64(4)}, line["after"], "states are JSON values")
			require.Equal(t, hex.EncodeToString(all[0].Hash), line["hash"])
		})

		t.Run("csv", func(t *testing.T) {
			records, err := csv.NewReader(bytes.NewReader(mustExport(t, b, Filter{Actor: "bob"}, FormatCSV))).ReadAll()
			require.NoError(t, err)
			require.Equal(t, csvHeader, records[0])
			require.Len(t, records, 1+4, "header and bob's entries")
			var bobs []Entry
			for _, e := range all {
				if e.Actor == "bob" {
					bobs = append(bobs, e)
				}
			}
			for i, rec := range records[1:] {
				want := bobs[i]
				require.Equal(t, strconv.FormatInt(want.Seq, 10), rec[0])
				at, err := time.Parse(time.RFC3339Nano, rec[1])
				require.NoError(t, err)
				require.True(t, want.At.Equal(at), "at to the microsecond: %s", rec[1])
				require.Equal(t, "bob", rec[2])
				require.Equal(t, "'"+want.Reason, rec[7], "a formula is defused, quotes and newlines kept")
				require.JSONEq(t, string(want.Before), rec[8])
				require.JSONEq(t, string(want.After), rec[9])
				require.Equal(t, want.Outcome, rec[10])
				require.Equal(t, hex.EncodeToString(want.PrevHash), rec[14])
				require.Equal(t, hex.EncodeToString(want.Hash), rec[15])
			}
		})

		t.Run("from a cursor", func(t *testing.T) {
			out := mustExport(t, b, Filter{After: 3}, FormatJSONL)
			require.Equal(t, 2, bytes.Count(out, []byte("\n")), "seq 2 and 1")
			out = mustExport(t, b, Filter{Actor: "nobody"}, FormatCSV)
			require.Equal(t, 1, bytes.Count(out, []byte("\n")), "header only")
		})

		t.Run("refused", func(t *testing.T) {
			var buf bytes.Buffer
			require.ErrorIs(t, b.trail.Export(ctx, Filter{}, &buf, "xml"), ErrInvalid)
			require.ErrorIs(t, b.trail.Export(ctx, Filter{TargetID: "1"}, &buf, FormatCSV), ErrInvalid)
			require.Zero(t, buf.Len(), "nothing written")
			errWrite := errors.New("client went away")
			require.ErrorIs(t, b.trail.Export(ctx, Filter{}, failingWriter{errWrite}, FormatJSONL), errWrite)
		})
	})
}

func mustExport(t *testing.T, b testBundle, f Filter, format string) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, b.trail.Export(t.Context(), f, &buf, format))
	return buf.Bytes()
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }
