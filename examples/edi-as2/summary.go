package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// summary is the run's outcome; -summary writes it as one JSON object.
type summary struct {
	Produced        int     `json:"produced"`
	DeliveredUnique int     `json:"delivered_unique"`
	Duplicates      int     `json:"duplicates"`
	Lost            int     `json:"lost"`
	Diverted        int     `json:"diverted"`
	DeadLettered    int     `json:"dead_lettered"`
	Trips           int     `json:"trips"`
	PartnerErrors   int     `json:"partner_errors"`
	BacklogPeak     int     `json:"backlog_peak"`
	Drained         int     `json:"drained"`
	SignedEncrypted int     `json:"signed_encrypted"` // orders the partner processed that were signed and encrypted
	SignedMDNs      int     `json:"signed_mdns"`      // signed MDNs the partner returned
	ElapsedS        float64 `json:"elapsed_s"`
}

func (s *summary) writeFile(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

func (s *summary) print(w io.Writer) {
	fmt.Fprintf(w, "\nproduced %d, delivered %d unique (%d duplicates), dead-lettered %d, lost %d\n",
		s.Produced, s.DeliveredUnique, s.Duplicates, s.DeadLettered, s.Lost)
	fmt.Fprintf(w, "signed and encrypted %d, signed MDNs %d\n", s.SignedEncrypted, s.SignedMDNs)
	fmt.Fprintf(w, "trips %d, diverted %d, drained %d, backlog peak %d, partner errors %d, elapsed %.1fs\n",
		s.Trips, s.Diverted, s.Drained, s.BacklogPeak, s.PartnerErrors, s.ElapsedS)
}
