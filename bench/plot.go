package bench

import (
	"fmt"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// writePlots draws the three PNGs of a run: TTFT per request, prompt vs
// cached tokens per request, and the cumulative wall time.
func writePlots(dir string, res *Result) error {
	var done []*Record
	for _, r := range res.Records {
		if r.Completed {
			done = append(done, r)
		}
	}
	sort.Slice(done, func(i, j int) bool { return done[i].Seq < done[j].Seq })

	// TTFT per request, in the order the requests ran.
	ttft := make(plotter.XYs, len(done))
	for i, r := range done {
		ttft[i] = plotter.XY{X: float64(i + 1), Y: r.TTFTms}
	}
	if err := savePlot(filepath.Join(dir, TTFTPlotFile), "Time to first token per request", "request (in run order)", "TTFT (ms)",
		series{"TTFT", ttft, true}); err != nil {
		return err
	}

	// Prompt tokens and the cached part, per request in workload order.
	var prompt, cached, ideal plotter.XYs
	client := res.Config.Counter != nil
	for i, r := range res.Records {
		if !r.Completed {
			continue
		}
		x := float64(i + 1)
		n := r.ServerPromptTokens
		if client {
			n = r.PromptTokens
		}
		prompt = append(prompt, plotter.XY{X: x, Y: float64(n)})
		if r.CachedTokens >= 0 {
			cached = append(cached, plotter.XY{X: x, Y: float64(r.CachedTokens)})
		}
		if client {
			ideal = append(ideal, plotter.XY{X: x, Y: float64(r.IdealCachedTokens)})
		}
	}
	lines := []series{{"prompt tokens", prompt, false}, {"cached (server)", cached, false}}
	if client {
		lines = append(lines, series{"ideal cached", ideal, false})
	}
	if err := savePlot(filepath.Join(dir, CachePlotFile), "Prompt tokens and prefix-cache hits per request", "request (workload order)", "tokens", lines...); err != nil {
		return err
	}

	// Cumulative wall time against requests completed.
	cum := make(plotter.XYs, len(done))
	for i, r := range done {
		cum[i] = plotter.XY{X: float64(i + 1), Y: r.EndS}
	}
	return savePlot(filepath.Join(dir, CumulativePlotFile), "Cumulative time", "requests completed", "seconds since start",
		series{"wall time", cum, false})
}

type series struct {
	name    string
	xys     plotter.XYs
	scatter bool
}

func savePlot(path, title, xLabel, yLabel string, ss ...series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	for i, s := range ss {
		if len(s.xys) == 0 {
			continue
		}
		if s.scatter {
			sc, err := plotter.NewScatter(s.xys)
			if err != nil {
				return fmt.Errorf("plot %s: %w", path, err)
			}
			sc.GlyphStyle.Color = plotutil.Color(i)
			sc.GlyphStyle.Radius = vg.Points(1.5)
			sc.GlyphStyle.Shape = draw.CircleGlyph{}
			p.Add(sc)
			p.Legend.Add(s.name, sc)
			continue
		}
		l, err := plotter.NewLine(s.xys)
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1)
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	p.Y.Max *= 1.15 // headroom for the legend
	if err := p.Save(10*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}
