package exampleutil

import (
	"encoding/json"
	"fmt"
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
	// DeliveredUnique counts produced messages the partner received at
	// least once.
	DeliveredUnique int `json:"delivered_unique"`
	// Duplicates counts receipts beyond the first (at-least-once
	// redeliveries the partner recognised).
	Duplicates int `json:"duplicates"`
	// Lost counts produced messages neither received, dead-lettered nor
	// queued.
	Lost int `json:"lost"`
	// Queued counts messages still in a stream when the run ended (the
	// retry backlog and source messages not yet acked): not lost, not yet
	// delivered. Set it with [Summary.Unsettled].
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
}

// Account sets Produced, DeliveredUnique, Duplicates and Lost from the ids
// produced: received(id) is how many times the partner received id, and
// dead(id) whether it was dead-lettered. An id received n > 0 times is
// delivered with n-1 duplicates; one neither received nor dead-lettered is
// lost.
func (s *Summary) Account(ids []string, received func(id string) int, dead func(id string) bool) {
	s.Produced, s.DeliveredUnique, s.Duplicates, s.Lost = len(ids), 0, 0, 0
	for _, id := range ids {
		switch n := received(id); {
		case n > 0:
			s.DeliveredUnique++
			s.Duplicates += n - 1
		case dead(id):
		default:
			s.Lost++
		}
	}
}

// Unsettled records n messages still queued when the run ended; they are
// not lost, so Lost (as [Summary.Account] counted it) drops by up to n.
// Call it after Account.
func (s *Summary) Unsettled(n int) {
	s.Queued = n
	s.Lost = max(0, s.Lost-n)
}

// Elapsed sets ElapsedS to the time since start, rounded to 0.1 s.
func (s *Summary) Elapsed(start time.Time) {
	s.ElapsedS = math.Round(time.Since(start).Seconds()*10) / 10
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
