package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scenario and mode names, as given on the command line.
const (
	scenarioHot      = "hot"
	scenarioSpread   = "spread"
	scenarioSkewed   = "skewed"
	scenarioTransfer = "transfer"
	// scenarioLoad measures the read path: one aggregate of loadEvents
	// events, seeded before the measurement, loaded whole by every command.
	scenarioLoad = "load"

	modeActor   = "actor"
	modeOCC     = "occ"
	modeOCCFast = "occ-fast"
	modeRaw     = "raw"

	modeClusterLocal  = "cluster-local"
	modeClusterRemote = "cluster-remote"

	// modeActorPersonal is modeActor with erasure support: the deposited
	// event's note is declared personal data of its counter (subject: the
	// stream tag's value) and sealed with the counter's data key (an
	// in-memory key store) on every append.
	modeActorPersonal = "actor-personal"

	// modeActorStates is modeActor's transfer with runtime.DCB.Uses: the
	// accounts are aggregates (opened before the measurement) and a
	// transfer decides from the states their actors hold, with no read.
	modeActorStates = "actor-states"

	// modeHallgren is the peer library hallgren/eventsourcing on its
	// Postgres store (see mode_hallgren.go).
	modeHallgren = "hallgren"
)

var (
	allScenarios = []string{scenarioHot, scenarioSpread, scenarioSkewed, scenarioTransfer, scenarioLoad, scenarioProjection}
	allModes     = []string{modeActor, modeOCC, modeOCCFast, modeRaw}
	// clusterModes are measured only when named in -mode or with -cluster.
	clusterModes = []string{modeClusterLocal, modeClusterRemote}
	// erasureModes are measured only when named in -mode.
	erasureModes = []string{modeActorPersonal}
	// statesModes are measured only when named in -mode (transfer only).
	statesModes = []string{modeActorStates}
	// peerModes are other libraries, measured only when named in -mode.
	peerModes  = []string{modeHallgren}
	knownModes = slices.Concat(allModes, clusterModes, erasureModes, statesModes, peerModes)
	// loadModes are the modes the load scenario measures; it skips the others.
	loadModes = []string{modeActor, modeOCC, modeHallgren}
)

// Fixed sizes of the scenarios.
const (
	skewedStreams    = 10_000
	skewedZipfS      = 1.1 // Zipf exponent: the hottest stream takes about 11% of writes
	transferAccounts = 100
	loadEvents       = 1_000 // events of the load scenario's one aggregate
)

// options is the parsed command line.
type options struct {
	Scenario  string   // the scenario being measured, one of Scenarios
	Scenarios []string // as given in -scenario, measured one after another
	Modes     []string
	Writers   []int
	Duration  time.Duration // measured time per (mode, writers), over all runs
	Warmup    time.Duration // unmeasured time before each measurement
	Runs      int
	JSON      bool
	OutDir    string
	DB        string
	Pool      int
	Prefix    string // of the per-measurement Postgres schemas
	RawBatch  int
	Progress  time.Duration
	CPUProf   string // file for the Go CPU profile of the whole run
	MutexProf string // file for the Go mutex contention profile of the whole run
	Cluster   bool   // also measure cluster-local and cluster-remote
	// Events and ProjBatch size the projection scenario: events filled
	// before the catch-up runs, and the projection's batch size.
	Events    int
	ProjBatch int
	args      []string // as given, for the report
}

// cellDuration is the measured time of one (run, writers, mode) cell.
func (o options) cellDuration() time.Duration { return o.Duration / time.Duration(o.Runs) }

// journalName is "postgres" with -db and "memory" without.
func (o options) journalName() string {
	if o.DB != "" {
		return "postgres"
	}
	return "memory"
}

// parseOptions parses args (without the program name). Usage goes to w.
func parseOptions(args []string, w io.Writer) (options, error) {
	fs := flag.NewFlagSet("benchmarks", flag.ContinueOnError)
	fs.SetOutput(w)
	var o options
	var scenarios, modes, writers string
	fs.StringVar(&scenarios, "scenario", scenarioHot, "comma-separated scenarios, measured one after another: "+strings.Join(allScenarios, ", ")+" (projection only alone)")
	fs.StringVar(&modes, "mode", strings.Join(allModes, ","), "comma-separated modes: "+strings.Join(knownModes, ", ")+" (raw needs -db)")
	fs.BoolVar(&o.Cluster, "cluster", false, "also measure "+strings.Join(clusterModes, " and ")+": Execute on a two-member cluster over loopback, by the member hosting the streams and through the other one")
	fs.StringVar(&writers, "writers", "1,8,64", "comma-separated numbers of concurrent writers")
	fs.DurationVar(&o.Duration, "duration", 5*time.Second, "measured time of each (mode, writers) pair, split evenly across -runs")
	fs.DurationVar(&o.Warmup, "warmup", 250*time.Millisecond, "unmeasured warm-up before each measurement")
	fs.IntVar(&o.Runs, "runs", 3, "runs; modes alternate within each run, the table reports medians")
	fs.BoolVar(&o.JSON, "json", false, "print one JSON object per run, writers and mode on stdout (the table goes to stderr)")
	fs.StringVar(&o.OutDir, "out", "", "directory to write results.csv and chart.svg into (created if missing)")
	fs.StringVar(&o.DB, "db", "", "Postgres URL; each measurement gets a fresh schema, dropped after (empty: in-memory journal)")
	fs.IntVar(&o.Pool, "pool", 16, "Postgres connection pool size, the same for every mode")
	fs.StringVar(&o.Prefix, "schema-prefix", "bench_", "prefix of the per-measurement Postgres schemas (lowercase letters, digits, _)")
	fs.IntVar(&o.RawBatch, "raw-batch", 64, "rows per multi-row INSERT in raw mode")
	fs.DurationVar(&o.Progress, "progress", time.Second, "interval of the progress line on stderr (0: none)")
	fs.IntVar(&o.Events, "events", 1_000_000, "projection scenario: events to fill the journal with before the catch-up runs")
	fs.IntVar(&o.ProjBatch, "projection-batch", 1000, "projection scenario: records per projection batch")
	fs.StringVar(&o.CPUProf, "cpuprofile", "", "write the harness's Go CPU profile (every mode, every measurement) to this file, for go tool pprof")
	fs.StringVar(&o.MutexProf, "mutexprofile", "", "write the harness's Go mutex contention profile (every contended sync.Mutex, sampled 1 in 5) to this file, for go tool pprof")
	fs.Usage = func() {
		fmt.Fprintf(w, "Usage: go run ./benchmarks [flags]\n\nMeasures Scribe's actors against OCC retry loops and raw inserts (see doc.go).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.args = args
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q: every setting is a flag (see -help)", fs.Args())
	}
	for _, sc := range strings.Split(scenarios, ",") {
		sc = strings.TrimSpace(sc)
		if sc == "" {
			continue
		}
		if !slices.Contains(allScenarios, sc) {
			return o, fmt.Errorf("-scenario %q: want a comma-separated list of %s", sc, strings.Join(allScenarios, ", "))
		}
		if !slices.Contains(o.Scenarios, sc) {
			o.Scenarios = append(o.Scenarios, sc)
		}
	}
	switch {
	case len(o.Scenarios) == 0:
		return o, errors.New("-scenario is empty: name at least one of " + strings.Join(allScenarios, ", "))
	case len(o.Scenarios) > 1 && slices.Contains(o.Scenarios, scenarioProjection):
		return o, errors.New("-scenario projection has its own report: run it alone")
	}
	o.Scenario = o.Scenarios[0]
	for _, m := range strings.Split(modes, ",") {
		m = strings.TrimSpace(m)
		if m == "" {
			continue
		}
		if !slices.Contains(knownModes, m) {
			return o, fmt.Errorf("-mode %q: want a comma-separated list of %s", m, strings.Join(knownModes, ", "))
		}
		if !slices.Contains(o.Modes, m) {
			o.Modes = append(o.Modes, m)
		}
	}
	if o.Cluster {
		for _, m := range clusterModes {
			if !slices.Contains(o.Modes, m) {
				o.Modes = append(o.Modes, m)
			}
		}
	}
	if len(o.Modes) == 0 {
		return o, errors.New("-mode is empty: name at least one of " + strings.Join(allModes, ", "))
	}
	if slices.Contains(o.Modes, modeHallgren) && slices.Contains(o.Scenarios, scenarioTransfer) {
		return o, errors.New("-mode hallgren with -scenario transfer: the peer has no command over two aggregates; measure it in hot, spread, skewed or load")
	}
	for _, s := range strings.Split(writers, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 10_000 {
			return o, fmt.Errorf("-writers %q: want comma-separated integers between 1 and 10000", s)
		}
		if !slices.Contains(o.Writers, n) {
			o.Writers = append(o.Writers, n)
		}
	}
	if len(o.Writers) == 0 {
		return o, errors.New("-writers is empty: give at least one writer count, e.g. 1,8,64")
	}
	slices.Sort(o.Writers)
	switch {
	case o.Runs < 1:
		return o, fmt.Errorf("-runs %d: want at least 1", o.Runs)
	case o.Duration <= 0:
		return o, fmt.Errorf("-duration %v: want a positive duration such as 5s", o.Duration)
	case o.cellDuration() < 10*time.Millisecond:
		return o, fmt.Errorf("-duration %v over %d runs leaves %v per measurement: want at least 10ms", o.Duration, o.Runs, o.cellDuration())
	case o.Warmup < 0:
		return o, fmt.Errorf("-warmup %v: want zero or a positive duration", o.Warmup)
	case o.Pool < 1:
		return o, fmt.Errorf("-pool %d: want at least 1 connection", o.Pool)
	case !validPrefix(o.Prefix):
		return o, fmt.Errorf("-schema-prefix %q: want 1 to 40 lowercase letters, digits or underscores, starting with a letter", o.Prefix)
	case o.RawBatch < 1:
		return o, fmt.Errorf("-raw-batch %d: want at least 1 row", o.RawBatch)
	case o.Events < 1:
		return o, fmt.Errorf("-events %d: want at least 1", o.Events)
	case o.ProjBatch < 1:
		return o, fmt.Errorf("-projection-batch %d: want at least 1", o.ProjBatch)
	case o.Progress < 0:
		return o, fmt.Errorf("-progress %v: want zero (off) or a positive interval", o.Progress)
	}
	return o, nil
}

func validPrefix(p string) bool {
	if p == "" || len(p) > 40 || p[0] < 'a' || p[0] > 'z' {
		return false
	}
	for _, r := range p {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}
