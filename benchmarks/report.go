package main

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// jsonResult is one line of -json output: one run, writer count and mode.
type jsonResult struct {
	Scenario          string  `json:"scenario"`
	Journal           string  `json:"journal"`
	Mode              string  `json:"mode"`
	Writers           int     `json:"writers"`
	Streams           int     `json:"streams"`
	Run               int     `json:"run"`
	CommandsPerS      float64 `json:"commands_per_s"`
	EventsPerS        float64 `json:"events_per_s"`
	RetriesPerCommand float64 `json:"retries_per_command"`
	P50ms             float64 `json:"p50_ms"`
	P99ms             float64 `json:"p99_ms"`
	Errors            int64   `json:"errors"`
	Pool              int     `json:"pool,omitempty"`
	DurationS         float64 `json:"duration_s"`
	FirstError        string  `json:"first_error,omitempty"`
	// Sent to Postgres per completed command (see statementCounter), over
	// Completed commands (warm-up and late ones included).
	Completed              int64   `json:"completed,omitempty"`
	RoundTripsPerCommand   float64 `json:"round_trips_per_command,omitempty"`
	StatementsPerCommand   float64 `json:"statements_per_command,omitempty"`
	TransactionsPerCommand float64 `json:"transactions_per_command,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func toJSON(r cellResult, pool int) jsonResult {
	rt, st, tx, _ := r.perCommand()
	return jsonResult{
		Completed:            r.Completed,
		RoundTripsPerCommand: round(rt, 3), StatementsPerCommand: round(st, 3), TransactionsPerCommand: round(tx, 3),
		Scenario: r.Scenario, Journal: r.Journal, Mode: r.Mode, Writers: r.Writers, Streams: r.Streams, Run: r.Run,
		CommandsPerS: round(r.CommandsPerSec(), 1), EventsPerS: round(r.EventsPerSec(), 1),
		RetriesPerCommand: round(r.RetriesPerCommand(), 3),
		P50ms:             round(ms(r.P50), 3), P99ms: round(ms(r.P99), 3),
		Errors: r.Errors, Pool: pool, DurationS: r.Elapsed.Seconds(), FirstError: r.FirstErr,
	}
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// writeJSONLine prints one result as a JSON object on its own line.
func writeJSONLine(w io.Writer, r cellResult, pool int) error {
	b, err := json.Marshal(toJSON(r, pool))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// csvHeader is the first row of results.csv.
var csvHeader = []string{"scenario", "journal", "mode", "writers", "streams", "run", "commands_per_s", "events_per_s", "retries_per_command", "p50_ms", "p99_ms", "errors", "pool", "duration_s"}

// writeCSV writes one row per result.
func writeCSV(w io.Writer, results []cellResult, pool int) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, r := range results {
		j := toJSON(r, pool)
		row := []string{j.Scenario, j.Journal, j.Mode, strconv.Itoa(j.Writers), strconv.Itoa(j.Streams), strconv.Itoa(j.Run),
			f(j.CommandsPerS), f(j.EventsPerS), f(j.RetriesPerCommand), f(j.P50ms), f(j.P99ms),
			strconv.FormatInt(j.Errors, 10), strconv.Itoa(pool), f(j.DurationS)}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// summary is the table row of one writer count and mode: medians over runs.
type summary struct {
	Mode              string
	Writers           int
	Streams           int
	Runs              int
	CommandsPerS      float64
	EventsPerS        float64
	RetriesPerCommand float64
	P50, P99          time.Duration
	Errors            int64
	// ActorRatio is the median over runs of actor commands/s ÷ this mode's
	// commands/s in the same run (for raw: events/s); NaN when not measured.
	ActorRatio float64
	FirstErr   string
	// RoundTrips, Statements and Transactions are the medians over runs of
	// what the mode sent to Postgres per completed command; Sent reports
	// whether they were counted (not on the memory journal).
	RoundTrips, Statements, Transactions float64
	Sent                                 bool
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// summarize groups results by writer count and mode, in the order of modes.
func summarize(results []cellResult, modes []string) []summary {
	type key struct {
		writers int
		mode    string
	}
	byKey := map[key][]cellResult{}
	actorRun := map[[2]int]cellResult{} // (writers, run) → actor result
	var writers []int
	for _, r := range results {
		k := key{r.Writers, r.Mode}
		byKey[k] = append(byKey[k], r)
		if !slices.Contains(writers, r.Writers) {
			writers = append(writers, r.Writers)
		}
		if r.Mode == modeActor {
			actorRun[[2]int{r.Writers, r.Run}] = r
		}
	}
	slices.Sort(writers)
	var out []summary
	for _, w := range writers {
		for _, m := range modes {
			rs := byKey[key{w, m}]
			if len(rs) == 0 {
				continue
			}
			s := summary{Mode: m, Writers: w, Streams: rs[0].Streams, Runs: len(rs)}
			var cps, eps, rpc, p50, p99, ratios, rts, sts, txs []float64
			for _, r := range rs {
				if rt, st, tx, ok := r.perCommand(); ok {
					rts, sts, txs = append(rts, rt), append(sts, st), append(txs, tx)
				}
				cps = append(cps, r.CommandsPerSec())
				eps = append(eps, r.EventsPerSec())
				rpc = append(rpc, r.RetriesPerCommand())
				p50 = append(p50, float64(r.P50))
				p99 = append(p99, float64(r.P99))
				s.Errors += r.Errors
				if s.FirstErr == "" {
					s.FirstErr = r.FirstErr
				}
				if a, ok := actorRun[[2]int{w, r.Run}]; ok {
					num, den := a.CommandsPerSec(), r.CommandsPerSec()
					if m == modeRaw {
						num, den = a.EventsPerSec(), r.EventsPerSec()
					}
					switch {
					case den > 0:
						ratios = append(ratios, num/den)
					case num > 0:
						ratios = append(ratios, math.Inf(1))
					}
				}
			}
			s.CommandsPerS, s.EventsPerS, s.RetriesPerCommand = median(cps), median(eps), median(rpc)
			s.P50, s.P99 = time.Duration(median(p50)), time.Duration(median(p99))
			s.ActorRatio = median(ratios)
			if len(rts) > 0 {
				s.Sent = true
				s.RoundTrips, s.Statements, s.Transactions = median(rts), median(sts), median(txs)
			}
			out = append(out, s)
		}
	}
	return out
}

// runInfo is what the table's header states about a run of the harness.
type runInfo struct {
	Scenario, Journal string
	Pool              int
	Runs              int
	Cell, Warmup      time.Duration
	Machine           string
	Command           string
	Notes             []string
}

// writeTable prints the summary as a Markdown table with a header stating
// how it was measured, and notes below it.
func writeTable(w io.Writer, info runInfo, rows []summary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s · journal %s", info.Scenario, info.Journal)
	if info.Journal == "postgres" {
		fmt.Fprintf(&b, " · pool %d connections (every mode)", info.Pool)
	}
	fmt.Fprintf(&b, " · %d run(s) × %v measured per mode and writer count (after %v warm-up) · %s\n\n",
		info.Runs, info.Cell, info.Warmup, info.Machine)
	if info.Command != "" {
		fmt.Fprintf(&b, "`%s`\n\n", info.Command)
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintf(tw, "| writers\t mode\t %s/s\t events/s\t retries/cmd\t p50 ms\t p99 ms\t errors\t actor ÷ mode\t\n", unitOf(info.Scenario))
	fmt.Fprintln(tw, "|--------\t------\t-----------\t---------\t------------\t-------\t-------\t-------\t-------------\t")
	for _, s := range rows {
		ratio := "—"
		switch {
		case s.Mode == modeActor:
			ratio = "1×"
		case math.IsInf(s.ActorRatio, 1):
			ratio = "∞"
		case !math.IsNaN(s.ActorRatio):
			ratio = strconv.FormatFloat(s.ActorRatio, 'f', precision(s.ActorRatio), 64) + "×"
		}
		fmt.Fprintf(tw, "| %d\t %s\t %s\t %s\t %.3f\t %.3f\t %.3f\t %d\t %s\t\n",
			s.Writers, s.Mode, human(s.CommandsPerS), human(s.EventsPerS), s.RetriesPerCommand,
			ms(s.P50), ms(s.P99), s.Errors, ratio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// tabwriter.Debug separates columns with '|'; with the leading "| " of
	// each first cell that makes a Markdown table.
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if err := writeSentTable(w, info, rows); err != nil {
		return err
	}
	for _, s := range rows {
		if s.FirstErr != "" {
			fmt.Fprintf(w, "\nerrors of %s at %d writers (first): %s", s.Mode, s.Writers, s.FirstErr)
		}
	}
	for _, n := range info.Notes {
		fmt.Fprintf(w, "\nnote: %s", n)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// writeSentTable prints, for the rows counted on Postgres, what each mode
// sent per command (see statementCounter), as a second Markdown table.
func writeSentTable(w io.Writer, info runInfo, rows []summary) error {
	var b strings.Builder
	unit := strings.TrimSuffix(unitOf(info.Scenario), "s")
	fmt.Fprintf(&b, "\nsent to Postgres per %s (medians over runs; counted by a pgx tracer on each mode's pool, warm-up and background work included):\n\n", unit)
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| writers\t mode\t round trips\t statements\t transactions\t")
	fmt.Fprintln(tw, "|--------\t------\t------------\t-----------\t-------------\t")
	n := 0
	for _, s := range rows {
		if !s.Sent {
			continue
		}
		n++
		fmt.Fprintf(tw, "| %d\t %s\t %.2f\t %.2f\t %.2f\t\n", s.Writers, s.Mode, s.RoundTrips, s.Statements, s.Transactions)
	}
	if n == 0 {
		return nil
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func precision(v float64) int {
	switch {
	case v >= 100:
		return 0
	case v >= 10:
		return 1
	default:
		return 2
	}
}

// human renders a rate with thousands separators.
func human(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	n := int64(math.Round(v))
	s := strconv.FormatInt(n, 10)
	if n < 10 && v > 0 && v < 10 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// writeOutDir writes results.csv and chart.svg into dir.
func writeOutDir(dir string, info runInfo, results []cellResult, rows []summary, modes []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-out %s: %w", dir, err)
	}
	var csvBuf strings.Builder
	if err := writeCSV(&csvBuf, results, info.Pool); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.csv"), []byte(csvBuf.String()), 0o644); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	var svg strings.Builder
	writeSVG(&svg, info, rows, modes)
	if err := os.WriteFile(filepath.Join(dir, "chart.svg"), []byte(svg.String()), 0o644); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	return nil
}

// modeColors are the chart's line colours, one per mode (colour-blind safe).
var modeColors = map[string]string{modeActor: "#0072B2", modeOCC: "#D55E00", modeOCCFast: "#E69F00", modeRaw: "#009E73",
	modeClusterLocal: "#56B4E9", modeClusterRemote: "#CC79A7", modeHallgren: "#000000"}

// writeSVG draws two panels against writers, one line per mode, both axes
// logarithmic: median commands/s (raw: rows/s) on top and median p99 latency
// below, with axis labels, grid and one legend.
func writeSVG(w io.Writer, info runInfo, rows []summary, modes []string) {
	const (
		width, height          = 820, 860
		left, right, top, bott = 90, 190, 60, 70
		gap                    = 70
	)
	plotW := float64(width - left - right)
	plotH := (float64(height-top-bott) - gap) / 2
	var writers []int
	for _, s := range rows {
		if !slices.Contains(writers, s.Writers) {
			writers = append(writers, s.Writers)
		}
	}
	slices.Sort(writers)
	xMin, xMax := 0.0, 1.0
	if len(writers) > 0 {
		xMin, xMax = math.Log2(float64(writers[0])), math.Log2(float64(writers[len(writers)-1]))
	}
	x := func(n int) float64 {
		if xMax == xMin {
			return float64(left) + plotW/2
		}
		return float64(left) + (math.Log2(float64(n))-xMin)/(xMax-xMin)*plotW
	}
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">`+"\n", width, height, width, height)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	title := fmt.Sprintf("Scribe: %s scenario, %s journal", info.Scenario, info.Journal)
	if info.Journal == "postgres" {
		title += fmt.Sprintf(", pool %d", info.Pool)
	}
	fmt.Fprintf(w, `<text x="%d" y="28" font-size="16" font-weight="bold">%s</text>`+"\n", left, xmlEscape(title))
	fmt.Fprintf(w, `<text x="%d" y="46" fill="#555">median of %d run(s), %v each · %s</text>`+"\n", left, info.Runs, info.Cell, xmlEscape(info.Machine))
	throughput := func(s summary) float64 { return s.CommandsPerS }
	p99 := func(s summary) float64 { return ms(s.P99) }
	svgPanel(w, rows, modes, writers, x, float64(top), plotW, plotH, left, throughput,
		"commands per second (log scale; raw: rows)", "commands/s", true)
	svgPanel(w, rows, modes, writers, x, float64(top)+plotH+gap, plotW, plotH, left, p99,
		"p99 latency, ms (log scale; raw: of one 64-row insert)", "ms p99", false)
	fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">writers (log scale)</text>`+"\n", float64(left)+plotW/2, height-20)
	fmt.Fprintln(w, "</svg>")
}

// svgPanel draws one panel of writeSVG: value(s) of every summary against
// writers, a polyline per mode (with its legend when legend is set).
func svgPanel(w io.Writer, rows []summary, modes []string, writers []int, x func(int) float64,
	top, plotW, plotH float64, left int, value func(summary) float64, yLabel, unit string, legend bool) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range rows {
		if v := value(s); v > 0 {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	yMin, yMax := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if yMax <= yMin {
		yMax = yMin + 1
	}
	y := func(v float64) float64 {
		return top + plotH - (math.Log10(v)-yMin)/(yMax-yMin)*plotH
	}
	// Grid and y labels: one line per decade.
	for d := yMin; d <= yMax; d++ {
		yy := y(math.Pow(10, d))
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, yy, float64(left)+plotW, yy)
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-8, yy+4, decade(d))
	}
	for _, n := range writers {
		xx := x(n)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", xx, top, xx, top+plotH)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", xx, top+plotH+20, n)
	}
	fmt.Fprintf(w, `<rect x="%d" y="%.1f" width="%.0f" height="%.0f" fill="none" stroke="#333"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(w, `<text transform="translate(24 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", top+plotH/2, xmlEscape(yLabel))
	legendY := top + 10
	for _, m := range modes {
		var pts, marks []string
		for _, s := range rows {
			v := value(s)
			if s.Mode != m || v <= 0 {
				continue
			}
			px, py := x(s.Writers), y(v)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
			marks = append(marks, fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="4" fill="%s"><title>%s, %d writers: %s %s</title></circle>`, px, py, modeColors[m], m, s.Writers, human(v), unit))
		}
		if len(pts) == 0 {
			continue
		}
		dash := ""
		if !legend {
			dash = ` stroke-dasharray="6 3"`
		}
		fmt.Fprintf(w, `<polyline data-mode="%s" data-panel="%s" points="%s" fill="none" stroke="%s" stroke-width="2.5"%s/>`+"\n", m, xmlEscape(unit), strings.Join(pts, " "), modeColors[m], dash)
		for _, mk := range marks {
			fmt.Fprintln(w, mk)
		}
		if legend {
			lx := float64(left) + plotW + 20
			fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"/>`+"\n", lx, legendY, lx+28, legendY, modeColors[m])
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+36, legendY+4, m)
			legendY += 24
		}
	}
}

func decade(d float64) string {
	v := math.Pow(10, d)
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	default:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// sortResults orders results by run, writers and mode order (for CSV output).
func sortResults(rs []cellResult, modes []string) {
	slices.SortStableFunc(rs, func(a, b cellResult) int {
		return cmp.Or(cmp.Compare(a.Writers, b.Writers), cmp.Compare(a.Run, b.Run),
			cmp.Compare(slices.Index(modes, a.Mode), slices.Index(modes, b.Mode)))
	})
}
