// Package simplot draws the results of package sim with gonum.org/v1/plot:
// one lane per strategy, showing over time the share of offered calls the
// breaker admitted, the errors (failed or slow calls) as a share of offered
// calls, the open and half-open periods shaded, and the recovery moment
// marked. It is a separate package so that package sim has no plotting
// dependency.
//
// The README's "Choosing a strategy" table (sim/testdata/choosing-a-strategy.md)
// and plot (docs/sim-fragile.svg) are regenerated from the current breaker by
//
//	go generate ./sim/...
//
// which runs this package's TestChoosingAStrategy with -update; without
// -update that test fails when they are stale.
package simplot

//go:generate go test . -run TestChoosingAStrategy -update

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/floodgate-go/floodgate/breaker"
	"github.com/floodgate-go/floodgate/sim"
)

// ErrFormat is returned (wrapped) for an image format other than svg or png.
var ErrFormat = errors.New("simplot: unsupported format")

// maxPoints bounds the points drawn per series: longer runs are aggregated
// into wider buckets, so a 4 h run still makes a small file.
const maxPoints = 1200

// Colors.
var (
	admittedLine = color.NRGBA{R: 31, G: 119, B: 180, A: 255}
	admittedFill = color.NRGBA{R: 31, G: 119, B: 180, A: 70}
	errorLine    = color.NRGBA{R: 214, G: 39, B: 40, A: 255}
	openFill     = color.NRGBA{R: 214, G: 39, B: 40, A: 30}
	halfOpenFill = color.NRGBA{R: 255, G: 160, B: 0, A: 60}
	recoveryLine = color.NRGBA{R: 44, G: 160, B: 44, A: 255}
	phaseLine    = color.NRGBA{R: 110, G: 110, B: 110, A: 255}
)

// Write draws results of scenario sc in format "svg" or "png" to w. The
// output depends only on its inputs. It returns an error wrapping
// [ErrFormat] for another format, or the writer's error.
func Write(w io.Writer, format string, sc sim.Scenario, results []sim.Result) error {
	var c vg.CanvasWriterTo
	lanes := max(1, len(results))
	width, height := 9*vg.Inch, vg.Length(lanes)*1.4*vg.Inch+0.85*vg.Inch+0.3*vg.Inch
	switch format {
	case "svg":
		c = vgsvg.New(width, height)
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(110))}
	default:
		return fmt.Errorf("%w: %q, allowed svg or png", ErrFormat, format)
	}
	dc := draw.New(c)
	plots := make([][]*plot.Plot, len(results))
	for i := range results {
		p, err := lane(sc, &results[i], i == len(results)-1)
		if err != nil {
			return err
		}
		plots[i] = []*plot.Plot{p}
	}
	const header = 0.85 * vg.Inch
	head := dc
	head.Min.Y = head.Max.Y - header
	drawHeader(head, sc)
	body := dc
	body.Max.Y -= header
	canvases := plot.Align(plots, draw.Tiles{Rows: len(results), Cols: 1, PadY: 0.05 * vg.Inch,
		PadLeft: 0.05 * vg.Inch, PadRight: 0.15 * vg.Inch, PadBottom: 0.05 * vg.Inch}, body)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	_, err := c.WriteTo(w)
	return err
}

// WriteFile draws results to path; the format is taken from its extension,
// ".svg" or ".png".
func WriteFile(path string, sc sim.Scenario, results []sim.Result) (err error) {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	if format != "svg" && format != "png" {
		return fmt.Errorf("%w: file %q, allowed .svg or .png", ErrFormat, path)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return Write(f, format, sc, results)
}

// bucket is an aggregate of consecutive series points.
type bucket struct {
	x                         float64 // end time, seconds
	offered, admitted, errors int
	share                     float64 // breaker share at the end, when nothing was offered
	open, halfOpen            float64 // fraction of the points in each state
}

// aggregate merges series points so that at most maxPoints remain.
func aggregate(s *sim.Series) []bucket {
	n := s.Len()
	k := max(1, (n+maxPoints-1)/maxPoints)
	var out []bucket
	for i := 0; i < n; i += k {
		var b bucket
		m := 0
		for j := i; j < min(n, i+k); j++ {
			b.offered += s.Offered[j]
			b.admitted += s.Admitted[j]
			b.errors += s.Errors[j]
			b.share = s.Share[j]
			switch s.State[j] {
			case breaker.StateOpen:
				b.open++
			case breaker.StateHalfOpen:
				b.halfOpen++
			}
			m++
		}
		b.open /= float64(m)
		b.halfOpen /= float64(m)
		b.x = float64(min(n, i+k)) * s.Step.Seconds()
		out = append(out, b)
	}
	return out
}

// lane draws one strategy.
func lane(sc sim.Scenario, r *sim.Result, last bool) (*plot.Plot, error) {
	sc = sc.WithDefaults()
	bs := aggregate(&r.Series)
	p := plot.New()
	p.Y.Min, p.Y.Max = 0, 105
	p.X.Min, p.X.Max = 0, sc.Duration.Seconds()
	p.Y.Label.Text = r.Strategy + " (%)"
	p.Y.Label.TextStyle.Font.Size = vg.Points(8)
	p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 50, Label: "50"}, {Value: 100, Label: "100"}})
	p.Y.Tick.Label.Font.Size = vg.Points(7)
	p.X.Tick.Label.Font.Size = vg.Points(7)
	if last {
		p.X.Label.Text = "time since start (s)"
		p.X.Label.TextStyle.Font.Size = vg.Points(8)
	} else {
		p.X.Tick.Label.Color = color.Transparent
	}

	open := make(plotter.XYs, 0, len(bs)+1)
	half := make(plotter.XYs, 0, len(bs)+1)
	adm := make(plotter.XYs, 0, len(bs)+1)
	errs := make(plotter.XYs, 0, len(bs)+1)
	for i, b := range bs {
		share := b.share
		e := 0.0
		if b.offered > 0 {
			share = float64(b.admitted) / float64(b.offered)
			e = min(1, float64(b.errors)/float64(b.offered))
		}
		xs := []float64{b.x}
		if i == 0 {
			xs = []float64{0, b.x}
		}
		for _, x := range xs {
			open = append(open, plotter.XY{X: x, Y: 100 * b.open})
			half = append(half, plotter.XY{X: x, Y: 100 * b.halfOpen})
			adm = append(adm, plotter.XY{X: x, Y: 100 * share})
			errs = append(errs, plotter.XY{X: x, Y: 100 * e})
		}
	}
	open, half, adm, errs = steps(open), steps(half), steps(adm), steps(errs)

	// Shading: the share of each bucket spent open, and half-open.
	halfArea, err := area(half, halfOpenFill)
	if err != nil {
		return nil, err
	}
	openArea, err := area(open, openFill)
	if err != nil {
		return nil, err
	}
	admLine, err := plotter.NewLine(adm)
	if err != nil {
		return nil, err
	}
	admLine.StepStyle = plotter.PreStep
	admLine.FillColor = admittedFill
	admLine.LineStyle = draw.LineStyle{Color: admittedLine, Width: vg.Points(0.8)}
	errLine, err := plotter.NewLine(errs)
	if err != nil {
		return nil, err
	}
	errLine.StepStyle = plotter.PreStep
	errLine.LineStyle = draw.LineStyle{Color: errorLine, Width: vg.Points(0.8)}
	p.Add(halfArea, openArea, admLine, errLine)
	p.Add(vertical(sc.RecoverAt.Seconds(), recoveryLine, nil))
	if sc.Fragile > 0 {
		p.Add(vertical((sc.RecoverAt + sc.Fragile).Seconds(), phaseLine, dashes))
	}

	return p, nil
}

var dashes = []vg.Length{vg.Points(2), vg.Points(2)}

// drawHeader writes the title and the scenario on the left of c and the
// legend on its right.
func drawHeader(c draw.Canvas, sc sim.Scenario) {
	sty := plot.New().Title.TextStyle
	sty.Font.Size = vg.Points(10)
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YTop
	x, y := c.Min.X+0.1*vg.Inch, c.Max.Y-0.1*vg.Inch
	c.FillText(sty, vg.Point{X: x, Y: y}, "Recovery by half-open strategy")
	sty.Font.Size = vg.Points(7.5)
	y -= 0.22 * vg.Inch
	for _, line := range describe(sc) {
		c.FillText(sty, vg.Point{X: x, Y: y}, line)
		y -= 0.14 * vg.Inch
	}

	l := plot.NewLegend()
	l.Top = true
	l.TextStyle.Font.Size = vg.Points(7)
	l.ThumbnailWidth = vg.Points(14)
	l.Padding = vg.Points(1)
	l.XOffs = -0.15 * vg.Inch
	l.YOffs = -0.05 * vg.Inch
	adm, _ := area(plotter.XYs{{X: 0, Y: 0}}, admittedFill)
	adm.LineStyle = draw.LineStyle{Color: admittedLine, Width: vg.Points(0.8)}
	errs, _ := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}})
	errs.LineStyle = draw.LineStyle{Color: errorLine, Width: vg.Points(0.8)}
	open, _ := area(plotter.XYs{{X: 0, Y: 0}}, openFill)
	half, _ := area(plotter.XYs{{X: 0, Y: 0}}, halfOpenFill)
	l.Add("admitted, % of offered calls", adm)
	l.Add("errors (failed or slow), % of offered", errs)
	l.Add("breaker open", open)
	l.Add("breaker half-open", half)
	l.Add("dependency recovers", vertical(0, recoveryLine, nil))
	if sc.Fragile > 0 {
		l.Add("full capacity returns", vertical(0, phaseLine, dashes))
	}
	l.Draw(c)
}

// describe returns the scenario in a few short lines.
func describe(sc sim.Scenario) []string {
	sc = sc.WithDefaults()
	name := sc.Name
	if name == "" {
		name = "custom"
	}
	var ph []string
	for _, p := range sc.Phases() {
		s := fmt.Sprintf("%s %s–%s", p.Name, sim.FormatDuration(p.Start), sim.FormatDuration(p.End))
		if p.Capacity > 0 {
			s += fmt.Sprintf(" (%g calls/s, excess %s)", p.Capacity, p.Overflow)
		}
		ph = append(ph, s)
	}
	last := fmt.Sprintf("slow call > %s", sim.FormatDuration(sc.SlowCallDuration))
	for _, x := range sc.Settings() {
		if !strings.HasPrefix(x, "slow call") {
			last += "; " + x
		}
	}
	return []string{
		fmt.Sprintf("scenario %s: %g calls/s offered (%s arrivals), seed %d", name, sc.Rate, sc.Arrivals, sc.Seed),
		"dependency: " + strings.Join(ph, ", "),
		last,
	}
}

// steps drops the points of a pre-step line that do not change it: of a
// run of equal values only the last point is needed.
func steps(xys plotter.XYs) plotter.XYs {
	if len(xys) < 3 {
		return xys
	}
	out := plotter.XYs{xys[0]}
	for i := 1; i < len(xys); i++ {
		if i == len(xys)-1 || xys[i].Y != xys[i+1].Y {
			out = append(out, xys[i])
		}
	}
	return out
}

// area returns a pre-step filled area without an outline.
func area(xys plotter.XYs, fill color.Color) (*plotter.Line, error) {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	l.StepStyle = plotter.PreStep
	l.FillColor = fill
	l.LineStyle.Width = 0
	return l, nil
}

// vertical returns a vertical line at x across the lane.
func vertical(x float64, c color.Color, dashes []vg.Length) *plotter.Line {
	l, _ := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: 105}})
	l.LineStyle = draw.LineStyle{Color: c, Width: vg.Points(1), Dashes: dashes}
	return l
}
