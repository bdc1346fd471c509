package x12

import (
	"math/big"
	"strconv"
)

// functionalIDs maps transaction set IDs (ST01) to the functional identifier
// code (GS01) of the group that may carry them.
var functionalIDs = map[string]string{
	"850": "PO", // purchase order
	"855": "PR", // purchase order acknowledgment
	"856": "SH", // ship notice
	"810": "IN", // invoice
	"997": "FA", // functional acknowledgment
	"999": "FA", // implementation acknowledgment
}

// Validate checks that the envelopes agree with their contents:
//
//   - ISA13 is 9 digits and equals IEA02; IEA01 is the number of groups;
//   - GS06 is 1 to 9 digits, unique in the interchange, and equals GE02; GE01
//     is the number of transaction sets; GS01 fits ST01 for known set types;
//   - ST02 is 4 to 9 characters, unique in the group, and equals SE02; SE01
//     is the number of segments from ST to SE inclusive;
//   - in a set with a CTT segment, CTT01 is the number of PO1 segments and
//     CTT02, when present, is the sum of their quantities (PO102).
//
// The error wraps [ErrInvalid] in a [*SegmentError] naming the segment and
// the element.
func (ic *Interchange) Validate() error {
	pos := 1 // ISA
	if !isDigits(ic.ISA[13], 9, 9) {
		return invalidErr(pos, "ISA", "ISA13 %q must be 9 digits", ic.ISA[13])
	}
	groupNumbers := map[string]bool{}
	for _, g := range ic.Groups {
		pos++
		gsPos := pos
		if len(g.GS) < 9 {
			return invalidErr(pos, "GS", "has %d elements, want 8", len(g.GS)-1)
		}
		gcn := g.GS.Element(6)
		if !isDigits(gcn, 1, 9) {
			return invalidErr(pos, "GS", "GS06 %q must be 1 to 9 digits", gcn)
		}
		if groupNumbers[gcn] {
			return invalidErr(pos, "GS", "GS06 %s is not unique in the interchange", gcn)
		}
		groupNumbers[gcn] = true
		setNumbers := map[string]bool{}
		for _, s := range g.Sets {
			st, se := s.Segments[0], s.Segments[len(s.Segments)-1]
			pos++
			stPos := pos
			scn := st.Element(2)
			if len(scn) < 4 || len(scn) > 9 {
				return invalidErr(pos, "ST", "ST02 %q must be 4 to 9 characters", scn)
			}
			if setNumbers[scn] {
				return invalidErr(pos, "ST", "ST02 %s is not unique in group %s", scn, gcn)
			}
			setNumbers[scn] = true
			if want, ok := functionalIDs[st.Element(1)]; ok && g.GS.Element(1) != want {
				return invalidErr(pos, "ST", "ST01 %s belongs in a %s group, GS01 (segment %d) is %q", st.Element(1), want, gsPos, g.GS.Element(1))
			}
			if err := validateCTT(s, stPos); err != nil {
				return err
			}
			pos += len(s.Segments) - 1 // SE
			if n, err := strconv.Atoi(se.Element(1)); err != nil || n != len(s.Segments) {
				return invalidErr(pos, "SE", "SE01 %q, want %d (segments ST..SE of set %s)", se.Element(1), len(s.Segments), scn)
			}
			if se.Element(2) != scn {
				return invalidErr(pos, "SE", "SE02 %q does not match ST02 %q (segment %d)", se.Element(2), scn, stPos)
			}
		}
		pos++ // GE
		if n, err := strconv.Atoi(g.GE.Element(1)); err != nil || n != len(g.Sets) {
			return invalidErr(pos, "GE", "GE01 %q, want %d (transaction sets in group %s)", g.GE.Element(1), len(g.Sets), gcn)
		}
		if g.GE.Element(2) != gcn {
			return invalidErr(pos, "GE", "GE02 %q does not match GS06 %q (segment %d)", g.GE.Element(2), gcn, gsPos)
		}
	}
	pos++ // IEA
	if n, err := strconv.Atoi(ic.IEA.Element(1)); err != nil || n != len(ic.Groups) {
		return invalidErr(pos, "IEA", "IEA01 %q, want %d (functional groups)", ic.IEA.Element(1), len(ic.Groups))
	}
	if ic.IEA.Element(2) != ic.ISA[13] {
		return invalidErr(pos, "IEA", "IEA02 %q does not match ISA13 %q", ic.IEA.Element(2), ic.ISA[13])
	}
	return nil
}

// validateCTT checks a set's CTT transaction totals against its PO1 line
// items. stPos is the position of the set's ST.
func validateCTT(s TransactionSet, stPos int) error {
	lines := 0
	sum := new(big.Rat)
	for _, seg := range s.Segments {
		if seg.ID() != "PO1" {
			continue
		}
		lines++
		if q := seg.Element(2); q != "" {
			r, ok := new(big.Rat).SetString(q)
			if !ok {
				return nil // not a number: nothing to check the hash total against
			}
			sum.Add(sum, r)
		}
	}
	for i, seg := range s.Segments {
		if seg.ID() != "CTT" {
			continue
		}
		pos := stPos + i
		if n, err := strconv.Atoi(seg.Element(1)); err != nil || n != lines {
			return invalidErr(pos, "CTT", "CTT01 %q, want %d (PO1 line items)", seg.Element(1), lines)
		}
		if h := seg.Element(2); h != "" {
			r, ok := new(big.Rat).SetString(h)
			if !ok || r.Cmp(sum) != 0 {
				return invalidErr(pos, "CTT", "CTT02 hash total %q, want %s (sum of PO102 quantities)", h, sum.FloatString(ratDecimals(sum)))
			}
		}
	}
	return nil
}

// ratDecimals returns how many decimals print r exactly (up to 6).
func ratDecimals(r *big.Rat) int {
	for d := 0; d < 6; d++ {
		s := r.FloatString(d)
		if back, ok := new(big.Rat).SetString(s); ok && back.Cmp(r) == 0 {
			return d
		}
	}
	return 6
}

func isDigits(s string, minLen, maxLen int) bool {
	if len(s) < minLen || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
