package x12_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/floodgate-go/floodgate/internal/x12"
)

const testdata = "../../examples/edi-as2/testdata"

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTestdataParsesAndValidates(t *testing.T) {
	names, _ := filepath.Glob(filepath.Join(testdata, "po-*.x12"))
	if len(names) < 3 {
		t.Fatalf("found %d po-*.x12 files, want at least 3", len(names))
	}
	seen := map[string]string{}
	for _, name := range names {
		t.Run(filepath.Base(name), func(t *testing.T) {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if i := bytes.IndexByte(data, '~'); i != 105 {
				t.Errorf("ISA terminator at offset %d, want 105 (ISA is 106 characters)", i)
			}
			ic, err := x12.Parse(data)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if err := ic.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got := ic.Bytes(); !bytes.Equal(got, data) {
				t.Errorf("Bytes() does not reproduce the file:\n%s", got)
			}
			if ic.Separators.Element != '*' || ic.Separators.Segment != '~' || ic.Separators.SubElement != '>' {
				t.Errorf("Separators = %+v", ic.Separators)
			}
			if ic.TransactionSets() == 0 {
				t.Error("no transaction sets")
			}
			for _, g := range ic.Groups {
				if g.GS.Element(1) != "PO" {
					t.Errorf("GS01 = %q, want PO", g.GS.Element(1))
				}
				for _, s := range g.Sets {
					ids := map[string]int{}
					for _, seg := range s.Segments {
						ids[seg.ID()]++
					}
					for _, id := range []string{"BEG", "REF", "DTM", "N1", "N3", "N4", "PO1", "PID", "CTT"} {
						if ids[id] == 0 {
							t.Errorf("set %s has no %s segment", s.Segments[0].Element(2), id)
						}
					}
				}
			}
			if other, dup := seen[ic.ControlNumber()]; dup {
				t.Errorf("ISA13 %s also in %s", ic.ControlNumber(), other)
			}
			seen[ic.ControlNumber()] = name
		})
	}
}

func TestLoadDir(t *testing.T) {
	ics, err := x12.LoadDir(testdata)
	if err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(testdata, "*.x12"))
	if len(ics) != len(names) {
		t.Fatalf("LoadDir returned %d interchanges, want %d", len(ics), len(names))
	}
	if _, err := x12.LoadDir(t.TempDir()); !errors.Is(err, x12.ErrNoFiles) {
		t.Errorf("LoadDir(empty) = %v, want ErrNoFiles", err)
	}
	dir := t.TempDir()
	bad := bytes.Replace(readTestdata(t, "po-1001-dc-replenishment.x12"), []byte("SE*23*0001"), []byte("SE*22*0001"), 1)
	if err := os.WriteFile(filepath.Join(dir, "po-bad.x12"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = x12.LoadDir(dir)
	if !errors.Is(err, x12.ErrInvalid) || !strings.Contains(err.Error(), "po-bad.x12") {
		t.Errorf("LoadDir(bad) = %v, want ErrInvalid naming po-bad.x12", err)
	}
}

func TestRenumber(t *testing.T) {
	ics, err := x12.LoadDir(testdata)
	if err != nil {
		t.Fatal(err)
	}
	for _, ic := range ics {
		t.Run(ic.ControlNumber(), func(t *testing.T) {
			before := ic.Bytes()
			out := ic.Renumber(123456789, 4242, 17)
			if !bytes.Equal(ic.Bytes(), before) {
				t.Fatal("Renumber modified the receiver")
			}
			re, err := x12.Parse(out)
			if err != nil {
				t.Fatalf("Parse(renumbered): %v\n%s", err, out)
			}
			if err := re.Validate(); err != nil {
				t.Fatalf("Validate(renumbered): %v\n%s", err, out)
			}
			if re.ControlNumber() != "123456789" || re.IEA.Element(2) != "123456789" {
				t.Errorf("ISA13/IEA02 = %s/%s", re.ControlNumber(), re.IEA.Element(2))
			}
			set := 17
			for gi, g := range re.Groups {
				if want := fmt.Sprint(4242 + gi); g.GS.Element(6) != want || g.GE.Element(2) != want {
					t.Errorf("group %d: GS06/GE02 = %s/%s, want %s", gi, g.GS.Element(6), g.GE.Element(2), want)
				}
				for _, s := range g.Sets {
					want := fmt.Sprintf("%04d", set)
					set++
					if s.Segments[0].Element(2) != want || s.Segments[len(s.Segments)-1].Element(2) != want {
						t.Errorf("ST02/SE02 = %s/%s, want %s", s.Segments[0].Element(2), s.Segments[len(s.Segments)-1].Element(2), want)
					}
				}
			}
			// Everything but the control numbers is unchanged: same length,
			// same segments.
			if len(out) != len(before) {
				t.Errorf("renumbered length %d, original %d", len(out), len(before))
			}
			if re.Separators != ic.Separators {
				t.Errorf("separators changed: %+v -> %+v", ic.Separators, re.Separators)
			}
		})
	}
}

func TestRenumberWrapsAndPads(t *testing.T) {
	ic := parse(t, readTestdata(t, "po-1002-store-direct.x12"))
	for _, tt := range []struct {
		n    int
		want string
	}{
		{1, "000000001"},
		{999_999_999, "999999999"},
		{1_000_000_000, "000000001"},
		{0, "999999999"},
	} {
		re := parse(t, ic.Renumber(tt.n, tt.n, tt.n))
		if err := re.Validate(); err != nil {
			t.Errorf("Renumber(%d): %v", tt.n, err)
		}
		if re.ControlNumber() != tt.want {
			t.Errorf("Renumber(%d): ISA13 = %s, want %s", tt.n, re.ControlNumber(), tt.want)
		}
	}
}

func TestRenumberConcurrent(t *testing.T) {
	ic := parse(t, readTestdata(t, "po-1004-two-orders.x12"))
	const n = 64
	out := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = ic.Renumber(i+1, i+1, 1) })
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, b := range out {
		cn, err := x12.ControlNumberOf(b)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%09d", i+1); cn != want {
			t.Errorf("copy %d: ISA13 %s, want %s", i, cn, want)
		}
		if seen[cn] {
			t.Errorf("duplicate ISA13 %s", cn)
		}
		seen[cn] = true
		if err := parse(t, b).Validate(); err != nil {
			t.Errorf("copy %d: %v", i, err)
		}
	}
}

func parse(t *testing.T, b []byte) *x12.Interchange {
	t.Helper()
	ic, err := x12.Parse(b)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return ic
}

func TestControlNumberOf(t *testing.T) {
	cn, err := x12.ControlNumberOf(readTestdata(t, "po-1003-seasonal-5010.x12"))
	if err != nil || cn != "000001003" {
		t.Errorf("ControlNumberOf = %q, %v; want 000001003", cn, err)
	}
	if _, err := x12.ControlNumberOf([]byte("UNA:+.? 'UNB+UNOC:3")); !errors.Is(err, x12.ErrSyntax) {
		t.Errorf("ControlNumberOf(EDIFACT) = %v, want ErrSyntax", err)
	}
}

func TestSeparatorsFromISA(t *testing.T) {
	ic := parse(t, readTestdata(t, "po-1003-seasonal-5010.x12"))
	if ic.Separators.Repetition != '^' {
		t.Errorf("5010 Repetition = %q, want '^'", ic.Separators.Repetition)
	}
	ic = parse(t, readTestdata(t, "po-1001-dc-replenishment.x12"))
	if ic.Separators.Repetition != 0 {
		t.Errorf("4010 Repetition = %q, want none (ISA11 is U)", ic.Separators.Repetition)
	}

	// Other delimiters, no line breaks: '|' elements, ':' sub-elements,
	// '\'' terminator.
	src := string(readTestdata(t, "po-1002-store-direct.x12"))
	alt := strings.NewReplacer("*", "|", ">", ":", "~\n", "'").Replace(src)
	ic = parse(t, []byte(alt))
	if err := ic.Validate(); err != nil {
		t.Fatal(err)
	}
	if ic.Separators != (x12.Separators{Element: '|', SubElement: ':', Segment: '\''}) {
		t.Errorf("Separators = %+v", ic.Separators)
	}
	if !bytes.Equal(ic.Bytes(), []byte(alt)) {
		t.Error("Bytes() does not reproduce the input")
	}
	// CRLF line breaks are kept too.
	crlf := strings.ReplaceAll(src, "~\n", "~\r\n")
	if got := parse(t, []byte(crlf)).Bytes(); string(got) != crlf {
		t.Error("CRLF not reproduced")
	}
}

func TestRejectsBrokenInput(t *testing.T) {
	good := string(readTestdata(t, "po-1001-dc-replenishment.x12"))
	two := string(readTestdata(t, "po-1004-two-orders.x12"))
	tests := []struct {
		name    string
		data    string
		kind    error
		segment string // "x12: segment N (ID)" prefix expected in the message
		reason  string
	}{
		{"truncated ISA", good[:80], x12.ErrSyntax, "segment 1 (ISA)", "truncated"},
		{"ISA too short", strings.Replace(good, "NORTHWINDRTL   ", "NORTHWINDRTL  ", 1), x12.ErrSyntax, "segment 1 (ISA)", ""},
		{"not X12", "UNB+UNOC:3+NORTHWIND+BLUEWATER'", x12.ErrSyntax, "segment 1 (ISA)", "must start with ISA"},
		{"truncated body", good[:len(good)-30], x12.ErrSyntax, "", "truncated"},
		{"missing IEA", good[:strings.Index(good, "IEA")], x12.ErrSyntax, "(IEA)", "missing IEA"},
		{"missing SE", strings.Replace(good, "SE*23*0001~\n", "", 1), x12.ErrSyntax, "(GE)", "inside transaction set"},
		{"segment outside set", strings.Replace(good, "GE*1*1001~", "REF*DP*042~\nGE*1*1001~", 1), x12.ErrSyntax, "(REF)", "outside a transaction set"},
		{"data after IEA", good + "GS*PO*X*Y*20250314*0930*9*X*004010~\n", x12.ErrSyntax, "(GS)", "after IEA"},
		{"bad segment ID", strings.Replace(good, "BEG*", "beg*", 1), x12.ErrSyntax, "segment 4 (beg)", "segment ID"},
		{"wrong SE count", strings.Replace(good, "SE*23*0001", "SE*22*0001", 1), x12.ErrInvalid, "segment 25 (SE)", "SE01 \"22\", want 23"},
		{"SE02 mismatch", strings.Replace(good, "SE*23*0001", "SE*23*0002", 1), x12.ErrInvalid, "segment 25 (SE)", "SE02"},
		{"GE02 mismatch", strings.Replace(good, "GE*1*1001", "GE*1*1002", 1), x12.ErrInvalid, "segment 26 (GE)", "GE02"},
		{"GE01 count", strings.Replace(good, "GE*1*1001", "GE*2*1001", 1), x12.ErrInvalid, "segment 26 (GE)", "GE01"},
		{"IEA02 mismatch", strings.Replace(good, "IEA*1*000001001", "IEA*1*000001009", 1), x12.ErrInvalid, "segment 27 (IEA)", "IEA02"},
		{"IEA01 count", strings.Replace(good, "IEA*1*000001001", "IEA*2*000001001", 1), x12.ErrInvalid, "segment 27 (IEA)", "IEA01"},
		{"ISA13 not digits", strings.Replace(strings.Replace(good, "000001001", "00000100A", 1), "IEA*1*000001001", "IEA*1*00000100A", 1), x12.ErrInvalid, "segment 1 (ISA)", "ISA13"},
		{"CTT line count", strings.Replace(good, "CTT*4*156", "CTT*3*156", 1), x12.ErrInvalid, "segment 24 (CTT)", "CTT01"},
		{"CTT hash total", strings.Replace(good, "CTT*4*156", "CTT*4*155", 1), x12.ErrInvalid, "segment 24 (CTT)", "want 156"},
		{"wrong group type", strings.Replace(good, "GS*PO*", "GS*IN*", 1), x12.ErrInvalid, "segment 3 (ST)", "PO group"},
		{"duplicate ST02", strings.Replace(strings.Replace(two, "ST*850*0002", "ST*850*0001", 1), "*0002~", "*0001~", 1), x12.ErrInvalid, "(ST)", "not unique"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ic, err := x12.Parse([]byte(tt.data))
			if err == nil {
				err = ic.Validate()
			}
			if err == nil {
				t.Fatal("accepted")
			}
			t.Log(err)
			if !errors.Is(err, tt.kind) {
				t.Errorf("error %v, want Is %v", err, tt.kind)
			}
			var se *x12.SegmentError
			if !errors.As(err, &se) {
				t.Errorf("error %T, want *x12.SegmentError", err)
			}
			if !strings.Contains(err.Error(), tt.segment) || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q, want it to contain %q and %q", err, tt.segment, tt.reason)
			}
		})
	}
}
