package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// seconds returns d in seconds rounded to the millisecond, or nil for
// [Never] (JSON null).
func seconds(d time.Duration) *float64 {
	if d == Never {
		return nil
	}
	s := math.Round(d.Seconds()*1000) / 1000
	return &s
}

func secs(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

// formatSeconds formats d in seconds with two decimals, or "never".
func formatSeconds(d time.Duration) string {
	if d == Never {
		return "never"
	}
	return fmt.Sprintf("%.2f", d.Seconds())
}

// Describe returns a one-line description of the scenario: load, phases,
// recovery, and every breaker setting that changes the results: the open
// window (fixed, or doubling up to its cap), the slow-call duration when it
// is not the default 1s, the trip window when set, the backlog and the
// health check. Defaults are applied to a copy of s.
func (s Scenario) Describe() string {
	s.setDefaults()
	var b strings.Builder
	name := s.Name
	if name == "" {
		name = "custom"
	}
	fmt.Fprintf(&b, "%s: %g calls/s %s, seed %d;", name, s.Rate, s.Arrivals, s.Seed)
	for i, p := range s.Phases() {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s %s-%s", p.Name, FormatDuration(p.Start), FormatDuration(p.End))
		if p.Capacity > 0 {
			fmt.Fprintf(&b, " (%g calls/s, excess %s)", p.Capacity, p.Overflow)
		}
	}
	fmt.Fprintf(&b, "; recovery at %s", FormatDuration(s.RecoverAt))
	for _, x := range s.Settings() {
		b.WriteString("; " + x)
	}
	return b.String()
}

// Settings describes, one phrase each, the settings of the scenario that
// shape every strategy's breaker and drain: the retry backlog, the health
// check, the open window, the slow-call threshold when it is not the
// default, and the trip window when it is not the breaker's default.
// Defaults are applied to a copy of s. [Scenario.Describe] and the plots
// print them.
func (s Scenario) Settings() []string {
	s.setDefaults()
	var out []string
	if s.Backlog {
		out = append(out, fmt.Sprintf("retry backlog drained at %g calls/s once closed (eager: all at once)", s.DrainRate))
	}
	if s.HealthCheck {
		out = append(out, "health check every 1s while open (not eager)")
	}
	if s.FixedOpenWindow {
		out = append(out, fmt.Sprintf("fixed %s open window", FormatDuration(s.OpenWindow)))
	} else {
		out = append(out, fmt.Sprintf("open window %s doubling to %s (eager: fixed %[1]s)", FormatDuration(s.OpenWindow), FormatDuration(s.MaxOpenWindow)))
	}
	if s.SlowCallDuration != defaultSlowCallDuration {
		out = append(out, fmt.Sprintf("slow call > %s", FormatDuration(s.SlowCallDuration)))
	}
	if s.TripWindow > 0 || s.TripMinCalls > 0 {
		window := "the last 20 calls"
		if s.TripWindow > 0 {
			window = "the last " + FormatDuration(s.TripWindow)
		} else if s.TripMinCalls > 20 {
			window = fmt.Sprintf("the last %d calls", s.TripMinCalls)
		}
		minCalls := s.TripMinCalls
		if minCalls == 0 {
			minCalls = 10
		}
		out = append(out, fmt.Sprintf("trips over %s (at least %d %s)", window, minCalls, plural(minCalls, "call", "calls")))
	}
	return out
}

// plural returns one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// WriteTable writes the results as a table aligned for a terminal, under a
// line describing the scenario ([Scenario.Describe]). No line ends in
// whitespace. It returns the first error from writing to w.
func WriteTable(w io.Writer, sc Scenario, results []Result) error {
	if _, err := fmt.Fprintf(w, "scenario %s\n\n", sc.Describe()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if sc.Backlog {
		fmt.Fprintln(tw, "\terrors after\tre-trips after\ttime to\ttime to full\tmax probes\tprobes during\tprobe\t\tbacklog\ttime to")
		fmt.Fprintln(tw, "strategy\trecovery\trecovery\tclose (s)\ttraffic (s)\tin flight\toutage\tbursts\tdiverted\tpeak\tdrain (s)")
	} else {
		fmt.Fprintln(tw, "\terrors after\tre-trips after\ttime to\ttime to full\tmax probes\tprobes during\tprobe")
		fmt.Fprintln(tw, "strategy\trecovery\trecovery\tclose (s)\ttraffic (s)\tin flight\toutage\tbursts\tdiverted")
	}
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d", r.Strategy, r.ErrorsAfterRecovery,
			r.RetripsAfterRecovery, formatSeconds(r.TimeToClose), formatSeconds(r.TimeToFullTraffic),
			r.MaxProbesInFlight, r.ProbesDuringOutage, r.ProbeBursts, r.Diverted)
		if sc.Backlog {
			fmt.Fprintf(tw, "\t%d\t%s", r.BacklogPeak, formatSeconds(r.TimeToDrain))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// WriteMarkdown writes the results as a Markdown table, under a line
// describing the scenario ([Scenario.Describe]). It returns the error from
// writing to w, if any.
func WriteMarkdown(w io.Writer, sc Scenario, results []Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Scenario %s.\n\n", sc.Describe())
	b.WriteString("| strategy | errors after recovery | re-trips after recovery | time to close (s) | time to full traffic (s) | max probes in flight | probes during outage | probe bursts | diverted |")
	if sc.Backlog {
		b.WriteString(" backlog peak | time to drain (s) |\n")
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	} else {
		b.WriteString("\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	}
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %d | %d | %d | %d |", r.Strategy, r.ErrorsAfterRecovery,
			r.RetripsAfterRecovery, formatSeconds(r.TimeToClose), formatSeconds(r.TimeToFullTraffic),
			r.MaxProbesInFlight, r.ProbesDuringOutage, r.ProbeBursts, r.Diverted)
		if sc.Backlog {
			fmt.Fprintf(&b, " %d | %s |", r.BacklogPeak, formatSeconds(r.TimeToDrain))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type latencyJSON struct {
	MedianS float64 `json:"median_s"`
	P99S    float64 `json:"p99_s"`
}

type phaseJSON struct {
	Name     string      `json:"name"`
	StartS   float64     `json:"start_s"`
	EndS     float64     `json:"end_s"`
	Down     bool        `json:"down"`
	Capacity float64     `json:"capacity"`
	Overflow string      `json:"overflow,omitempty"`
	Latency  latencyJSON `json:"latency"`
}

type scenarioJSON struct {
	Name              string      `json:"name"`
	Rate              float64     `json:"rate"`
	Arrivals          string      `json:"arrivals"`
	DurationS         float64     `json:"duration_s"`
	RecoverAtS        float64     `json:"recover_at_s"`
	OutageS           float64     `json:"outage_s"`
	SlowOutage        bool        `json:"slow_outage"`
	FragileS          float64     `json:"fragile_s"`
	FragileCapacity   float64     `json:"fragile_capacity"`
	Overflow          string      `json:"overflow"`
	Healthy           latencyJSON `json:"healthy_latency"`
	Slow              latencyJSON `json:"slow_latency"`
	SlowCallDurationS float64     `json:"slow_call_duration_s"`
	OpenWindowS       float64     `json:"open_window_s"`
	MaxOpenWindowS    float64     `json:"max_open_window_s"`
	FixedOpenWindow   bool        `json:"fixed_open_window"`
	TripWindowS       float64     `json:"trip_window_s"`
	TripMinCalls      int         `json:"trip_min_calls"`
	HealthCheck       bool        `json:"health_check"`
	Capacity          float64     `json:"capacity"`
	Backlog           bool        `json:"backlog"`
	DrainRate         float64     `json:"drain_rate"`
	Seed              uint64      `json:"seed"`
	Phases            []phaseJSON `json:"phases"`
}

type seriesJSON struct {
	StepS         float64   `json:"step_s"`
	State         []string  `json:"state"`
	AdmittedShare []float64 `json:"admitted_share"`
	Errors        []int     `json:"errors"`
}

type resultJSON struct {
	Strategy             string      `json:"strategy"`
	ErrorsAfterRecovery  int         `json:"errors_after_recovery"`
	RetripsAfterRecovery int         `json:"retrips_after_recovery"`
	TimeToCloseS         *float64    `json:"time_to_close_s"`
	TimeToFullTrafficS   *float64    `json:"time_to_full_traffic_s"`
	MaxProbesInFlight    int         `json:"max_probes_in_flight"`
	ProbesDuringOutage   int         `json:"probes_during_outage"`
	ProbeBursts          int         `json:"probe_bursts"`
	Diverted             int         `json:"diverted"`
	Offered              int         `json:"offered"`
	Admitted             int         `json:"admitted"`
	Redelivered          int         `json:"redelivered"`
	BacklogPeak          int         `json:"backlog_peak"`
	BacklogLeft          int         `json:"backlog_left"`
	TimeToDrainS         *float64    `json:"time_to_drain_s"`
	Series               *seriesJSON `json:"series,omitempty"`
}

type reportJSON struct {
	Scenario scenarioJSON `json:"scenario"`
	Results  []resultJSON `json:"results"`
}

func latJSON(l Latency) latencyJSON {
	return latencyJSON{MedianS: secs(l.Median), P99S: secs(l.P99)}
}

// WriteJSON writes {"scenario": {…}, "results": [{…}, …]} on one line. The
// scenario holds its parameters (with defaults applied) and phases; each
// result holds "strategy" and the metrics: errors_after_recovery,
// retrips_after_recovery, time_to_close_s and time_to_full_traffic_s (null
// for never), max_probes_in_flight, probes_during_outage, probe_bursts,
// diverted, offered, admitted, redelivered, backlog_peak, backlog_left,
// time_to_drain_s (null for never) and, when withSeries is true, "series": the
// per-100 ms state, admitted share and errors. Times are in seconds. It
// returns the error from writing to w, if any.
func WriteJSON(w io.Writer, sc Scenario, results []Result, withSeries bool) error {
	sc.setDefaults()
	rep := reportJSON{Scenario: scenarioJSON{
		Name: sc.Name, Rate: sc.Rate, Arrivals: sc.Arrivals.String(),
		DurationS: secs(sc.Duration), RecoverAtS: secs(sc.RecoverAt), OutageS: secs(sc.Outage),
		SlowOutage: sc.SlowOutage, FragileS: secs(sc.Fragile), FragileCapacity: sc.FragileCapacity,
		Overflow: sc.Overflow.String(), Healthy: latJSON(sc.Healthy), Slow: latJSON(sc.Slow),
		SlowCallDurationS: secs(sc.SlowCallDuration), OpenWindowS: secs(sc.OpenWindow),
		MaxOpenWindowS: secs(sc.MaxOpenWindow), HealthCheck: sc.HealthCheck,
		FixedOpenWindow: sc.FixedOpenWindow, TripWindowS: secs(sc.TripWindow), TripMinCalls: sc.TripMinCalls,
		Capacity: sc.Capacity, Backlog: sc.Backlog, DrainRate: sc.DrainRate, Seed: sc.Seed,
	}}
	for _, p := range sc.Phases() {
		pj := phaseJSON{Name: p.Name, StartS: secs(p.Start), EndS: secs(p.End), Down: p.Down,
			Capacity: p.Capacity, Latency: latJSON(p.Latency)}
		if p.Capacity > 0 {
			pj.Overflow = p.Overflow.String()
		}
		rep.Scenario.Phases = append(rep.Scenario.Phases, pj)
	}
	rep.Results = make([]resultJSON, 0, len(results))
	for _, r := range results {
		rj := resultJSON{
			Strategy: r.Strategy, ErrorsAfterRecovery: r.ErrorsAfterRecovery,
			RetripsAfterRecovery: r.RetripsAfterRecovery, TimeToCloseS: seconds(r.TimeToClose),
			TimeToFullTrafficS: seconds(r.TimeToFullTraffic), MaxProbesInFlight: r.MaxProbesInFlight,
			ProbesDuringOutage: r.ProbesDuringOutage, ProbeBursts: r.ProbeBursts, Diverted: r.Diverted,
			Offered: r.Offered, Admitted: r.Admitted, Redelivered: r.Redelivered,
			BacklogPeak: r.BacklogPeak, BacklogLeft: r.BacklogLeft, TimeToDrainS: seconds(r.TimeToDrain),
		}
		if withSeries {
			s := &r.Series
			sj := &seriesJSON{StepS: secs(s.Step), State: make([]string, s.Len()),
				AdmittedShare: make([]float64, s.Len()), Errors: s.Errors}
			for i := range s.Len() {
				sj.State[i] = s.State[i].String()
				sj.AdmittedShare[i] = math.Round(s.AdmittedShare(i)*1000) / 1000
			}
			rj.Series = sj
		}
		rep.Results = append(rep.Results, rj)
	}
	return json.NewEncoder(w).Encode(rep)
}

// FormatDuration formats d compactly: "1m" rather than "1m0s", "4h1m"
// rather than "4h1m0s"; otherwise as [time.Duration.String].
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
