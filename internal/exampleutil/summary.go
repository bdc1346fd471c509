package exampleutil

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"time"
)

// Summary holds the keys every example's -summary JSON object has. An
// example embeds it in its own summary struct, whose extra fields
// encoding/json writes after these.
type Summary struct {
	// Produced counts the messages published for delivery.
	Produced int `json:"produced"`
	// DeliveredUnique counts produced messages their own partner
	// received at least once.
	DeliveredUnique int `json:"delivered_unique"`
	// Duplicates counts receipts beyond the first (at-least-once
	// redeliveries the partner recognised).
	Duplicates int `json:"duplicates"`
	// Lost counts produced messages neither received, dead-lettered nor
	// queued (the partners' Lost, less what is still in a source stream).
	Lost int `json:"lost"`
	// Queued counts messages still in a stream when the run ended (the
	// retry backlog and source messages not yet acked): not lost, not yet
	// delivered.
	Queued int `json:"queued"`
	// Diverted counts diversions to the retry queue.
	Diverted int `json:"diverted"`
	// DeadLettered counts messages dead-lettered.
	DeadLettered int `json:"dead_lettered"`
	// Trips counts breaker transitions to open.
	Trips int `json:"trips"`
	// PartnerErrors counts faulty partner answers, as the example defines
	// them.
	PartnerErrors int `json:"partner_errors"`
	// BacklogPeak is the largest retry backlog seen.
	BacklogPeak int `json:"backlog_peak"`
	// ElapsedS is the run's wall time in seconds, to 0.1 s.
	ElapsedS float64 `json:"elapsed_s"`
	// Misdelivered counts produced messages some partner other than their
	// own received (must be 0).
	Misdelivered int `json:"misdelivered"`
	// Partners holds the same accounting per partner, in the example's
	// partner order.
	Partners []PartnerSummary `json:"partners"`
}

// AddPartner appends ps to s.Partners and adds its counts to s's totals
// (Produced, DeliveredUnique, Duplicates, Misdelivered, Lost, Queued,
// Diverted, DeadLettered, Trips).
func (s *Summary) AddPartner(ps PartnerSummary) {
	s.Partners = append(s.Partners, ps)
	s.Produced += ps.Produced
	s.DeliveredUnique += ps.Delivered
	s.Duplicates += ps.Duplicates
	s.Misdelivered += ps.Misdelivered
	s.Lost += ps.Lost
	s.Queued += ps.Queued
	s.Diverted += ps.Diverted
	s.DeadLettered += ps.DeadLettered
	s.Trips += ps.Trips
}

// PartnerSummary is one partner's accounting: the messages produced for it
// and what became of them.
type PartnerSummary struct {
	// Partner is the partner key (an AS2-To, a webhook endpoint).
	Partner string `json:"partner"`
	// Faulty tells the partner that follows the fault script.
	Faulty bool `json:"faulty"`
	// Produced counts messages produced for this partner.
	Produced int `json:"produced"`
	// Delivered counts them received by this partner at least once.
	Delivered int `json:"delivered"`
	// Duplicates counts receipts beyond the first, at this partner.
	Duplicates int `json:"duplicates"`
	// Misdelivered counts them received by another partner (must be 0).
	Misdelivered int `json:"misdelivered"`
	// DeadLettered counts them dead-lettered.
	DeadLettered int `json:"dead_lettered"`
	// Queued counts this partner's retry backlog when the run ended.
	Queued int `json:"queued"`
	// Lost counts them neither received by this partner, dead-lettered
	// nor queued.
	Lost int `json:"lost"`
	// Diverted counts diversions to the retry queue.
	Diverted int `json:"diverted"`
	// Drained counts backlog messages this partner took.
	Drained int `json:"drained"`
	// Trips counts this partner's breaker transitions to open.
	Trips int `json:"trips"`
	// DrainS runs from the partner's recovery (its breaker's first close
	// after its last trip) to an empty backlog, in seconds; 0 when it
	// never had a backlog, -1 when its backlog never emptied.
	DrainS float64 `json:"drain_s"`
}

// Account sets Produced, Delivered, Duplicates, Misdelivered and Lost from
// the ids produced for the partner: own(id) is how many times this partner
// received id, elsewhere(id) how many times the other partners did, and
// dead(id) whether it was dead-lettered. Call [PartnerSummary.Unsettled]
// after it.
func (s *PartnerSummary) Account(ids []string, own, elsewhere func(id string) int, dead func(id string) bool) {
	s.Produced, s.Delivered, s.Duplicates, s.Misdelivered, s.Lost = len(ids), 0, 0, 0, 0
	for _, id := range ids {
		if elsewhere(id) > 0 {
			s.Misdelivered++
		}
		switch n := own(id); {
		case n > 0:
			s.Delivered++
			s.Duplicates += n - 1
		case dead(id):
		default:
			s.Lost++
		}
	}
}

// Unsettled records n of the partner's messages still queued: not lost.
func (s *PartnerSummary) Unsettled(n int) {
	s.Queued = n
	s.Lost = max(0, s.Lost-n)
}

// PrintPartners writes one line per partner: the per-partner summary.
func PrintPartners(w io.Writer, ps []PartnerSummary) {
	width := len("partner")
	for _, p := range ps {
		width = max(width, len(p.Partner)+len(" (faulty)"))
	}
	fmt.Fprintf(w, "%-*s %8s %9s %4s %12s %4s %6s %4s %8s %7s %5s %7s\n",
		width, "partner", "produced", "delivered", "dup", "misdelivered", "dead", "queued", "lost", "diverted", "drained", "trips", "drain_s")
	for _, p := range ps {
		name := p.Partner
		if p.Faulty {
			name += " (faulty)"
		}
		fmt.Fprintf(w, "%-*s %8d %9d %4d %12d %4d %6d %4d %8d %7d %5d %7.1f\n",
			width, name, p.Produced, p.Delivered, p.Duplicates, p.Misdelivered, p.DeadLettered, p.Queued, p.Lost,
			p.Diverted, p.Drained, p.Trips, p.DrainS)
	}
}

// Elapsed sets ElapsedS to the time since start, rounded to 0.1 s: it is
// [Summary.ElapsedAt] at time.Now().
func (s *Summary) Elapsed(start time.Time) {
	s.ElapsedAt(start, time.Now())
}

// ElapsedAt sets ElapsedS to the time from start to now, in seconds rounded
// to 0.1 s (half away from zero).
func (s *Summary) ElapsedAt(start, now time.Time) {
	s.ElapsedS = math.Round(now.Sub(start).Seconds()*10) / 10
}

// WriteJSON writes v as one indented JSON object to path.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

// OutputFile checks that flag -name's file path ("" is none) can be
// written, before a run that may take minutes ends by writing it: it opens
// path for writing, creating it empty if it is missing, and leaves a file
// that exists unchanged ([WriteJSON] replaces it later).
func (f *FlagCheck) OutputFile(name, path string) {
	if path == "" {
		return
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err == nil {
		err = fh.Close()
	}
	if err != nil {
		f.errs = append(f.errs, fmt.Errorf("-%s: cannot write the output file: %w", name, err))
	}
}
