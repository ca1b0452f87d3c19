package views

import (
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pathByFloats is Spark.Path as it was written first, with
// strconv.FormatFloat: the reference for the integer formatting.
func pathByFloats(s Spark) string {
	if len(s.Points) == 0 {
		return ""
	}
	pts := s.Points
	if len(pts) == 1 {
		pts = []int64{pts[0], pts[0]}
	}
	top := int64(1)
	for _, v := range pts {
		top = max(top, v)
	}
	var b strings.Builder
	for i, v := range pts {
		x := float64(i) * float64(sparkW-2) / float64(len(pts)-1)
		y := float64(sparkH-2) - float64(v)*float64(sparkH-4)/float64(top)
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatFloat(x+1, 'f', 1, 64) + "," + strconv.FormatFloat(y, 'f', 1, 64))
	}
	return b.String()
}

// tenths is a coordinate with one decimal.
var tenths = regexp.MustCompile(`^[0-9]+\.[0-9]$`)

// coords parses a polyline's points into their coordinates, x and y in
// turn.
func coords(t *testing.T, path string) []float64 {
	var out []float64
	for _, pt := range strings.Fields(path) {
		x, y, ok := strings.Cut(pt, ",")
		require.True(t, ok, pt)
		for _, c := range []string{x, y} {
			require.True(t, tenths.MatchString(c), c)
			f, err := strconv.ParseFloat(c, 64)
			require.NoError(t, err)
			out = append(out, f)
		}
	}
	return out
}

// The sparkline's points are those of float formatting, within the tenth
// of a pixel where rounding a half may differ, for every length up to a
// week of hours and counts from 0 to millions.
func TestSparkPathFormatsLikeFloats(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	require.Empty(t, Spark{}.Path())
	for n := 1; n <= 168; n++ {
		for _, top := range []int64{0, 1, 7, 1000, 49585, 3_000_000} {
			pts := make([]int64, n)
			for i := range pts {
				if top > 0 {
					pts[i] = r.Int64N(top + 1)
				}
			}
			s := Spark{Points: pts}
			want, got := coords(t, pathByFloats(s)), coords(t, s.Path())
			require.Len(t, got, len(want), "n %d, top %d", n, top)
			for i := range want {
				require.InDelta(t, want[i], got[i], 0.1001, "n %d, top %d, coordinate %d", n, top, i)
			}
		}
	}
}
