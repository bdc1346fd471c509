package x12

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// isaLen is the fixed length of an ISA segment, terminator included.
const isaLen = 106

// isaWidths are the fixed widths of ISA01..ISA16.
var isaWidths = [17]int{0, 2, 10, 2, 10, 2, 15, 2, 15, 6, 4, 1, 5, 9, 1, 1, 1}

// Separators are the delimiters of an interchange, defined by its ISA.
type Separators struct {
	// Element separates elements: the 4th character of the ISA, e.g. '*'.
	Element byte
	// SubElement separates the parts of a composite element: ISA16, e.g. '>'.
	SubElement byte
	// Repetition separates repeated elements: ISA11 from version 00402 on,
	// e.g. '^'; 0 in earlier versions, where ISA11 is a standards identifier.
	Repetition byte
	// Segment terminates every segment: the character after ISA16, e.g. '~'.
	Segment byte
}

// Segment is one segment: its ID followed by its elements, so that s[1] is
// the first element (e.g. for an ISA, s[13] is ISA13).
type Segment []string

// ID returns the segment ID, e.g. "ST".
func (s Segment) ID() string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// Element returns element n (1-based), or "" if the segment has fewer.
func (s Segment) Element(n int) string {
	if n < 1 || n >= len(s) {
		return ""
	}
	return s[n]
}

// TransactionSet is one ST ... SE transaction set, e.g. one purchase order.
type TransactionSet struct {
	// Segments are the set's segments, ST first and SE last.
	Segments []Segment
}

// Group is one GS ... GE functional group.
type Group struct {
	GS   Segment
	Sets []TransactionSet
	GE   Segment
}

// Interchange is one ISA ... IEA interchange. Create it with [Parse]. Its
// methods do not modify it, so one Interchange may be renumbered from many
// goroutines at once.
type Interchange struct {
	Separators Separators
	ISA        Segment
	Groups     []Group
	IEA        Segment
	// lineEnd is what follows each segment terminator, e.g. "\n" or "".
	lineEnd string
}

// Parse reads one interchange. The separators come from the ISA. Whitespace
// before the ISA and line breaks after segment terminators are allowed.
// Parse checks the ISA's fixed layout, the segment syntax and the nesting of
// ISA/GS/ST/SE/GE/IEA; [Interchange.Validate] checks counts and control
// numbers. Errors wrap [ErrSyntax] in a [*SegmentError] naming the segment.
func Parse(data []byte) (*Interchange, error) {
	data = bytes.TrimLeft(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), " \t\r\n")
	if !bytes.HasPrefix(data, []byte("ISA")) {
		return nil, syntaxErr(1, "ISA", "interchange must start with ISA")
	}
	if len(data) < isaLen {
		return nil, syntaxErr(1, "ISA", "truncated: %d bytes, an ISA has %d", len(data), isaLen)
	}
	sep := Separators{Element: data[3], SubElement: data[isaLen-2], Segment: data[isaLen-1]}
	for _, c := range []byte{sep.Element, sep.SubElement, sep.Segment} {
		if isAlnum(c) || c == ' ' {
			return nil, syntaxErr(1, "ISA", "delimiter %q is a letter, digit or space (is the ISA %d characters long?)", c, isaLen)
		}
	}
	if sep.Element == sep.SubElement || sep.Element == sep.Segment || sep.SubElement == sep.Segment {
		return nil, syntaxErr(1, "ISA", "delimiters %q %q %q are not distinct", sep.Element, sep.SubElement, sep.Segment)
	}
	isa := Segment(strings.Split(string(data[:isaLen-1]), string(sep.Element)))
	if len(isa) != 17 {
		return nil, syntaxErr(1, "ISA", "has %d elements, want 16 (is the ISA %d characters long?)", len(isa)-1, isaLen)
	}
	for i := 1; i <= 16; i++ {
		if len(isa[i]) != isaWidths[i] {
			return nil, syntaxErr(1, "ISA", "ISA%02d %q has %d characters, want %d", i, isa[i], len(isa[i]), isaWidths[i])
		}
	}
	if isa[12] >= "00402" && !isAlnum(isa[11][0]) {
		sep.Repetition = isa[11][0]
	}

	ic := &Interchange{Separators: sep, ISA: isa}
	rest := data[isaLen:]
	ic.lineEnd = string(rest[:len(rest)-len(bytes.TrimLeft(rest, "\r\n"))])

	pieces := bytes.Split(rest, []byte{sep.Segment})
	var (
		pos    = 1
		group  *Group
		set    *TransactionSet
		closed bool // IEA seen
	)
	for i, piece := range pieces {
		piece = bytes.Trim(piece, "\r\n")
		last := i == len(pieces)-1
		if last {
			if len(bytes.TrimSpace(piece)) != 0 {
				return nil, syntaxErr(pos+1, segID(piece, sep.Element), "no segment terminator %q (truncated?)", sep.Segment)
			}
			break
		}
		pos++
		if len(piece) == 0 {
			return nil, syntaxErr(pos, "", "empty segment")
		}
		seg := Segment(strings.Split(string(piece), string(sep.Element)))
		id := seg.ID()
		if !validID(id) {
			return nil, syntaxErr(pos, id, "segment ID must be 2 or 3 upper-case letters or digits")
		}
		switch {
		case closed:
			return nil, syntaxErr(pos, id, "data after IEA")
		case set != nil:
			set.Segments = append(set.Segments, seg)
			switch id {
			case "SE":
				group.Sets = append(group.Sets, *set)
				set = nil
			case "ST", "GS", "GE", "ISA", "IEA":
				return nil, syntaxErr(pos, id, "inside transaction set %s (missing SE?)", set.Segments[0].Element(2))
			}
		case group != nil:
			switch id {
			case "ST":
				set = &TransactionSet{Segments: []Segment{seg}}
			case "GE":
				group.GE = seg
				ic.Groups = append(ic.Groups, *group)
				group = nil
			default:
				return nil, syntaxErr(pos, id, "outside a transaction set (missing ST or GE?)")
			}
		default:
			switch id {
			case "GS":
				group = &Group{GS: seg}
			case "IEA":
				ic.IEA = seg
				closed = true
			default:
				return nil, syntaxErr(pos, id, "outside a functional group (missing GS or IEA?)")
			}
		}
	}
	if !closed {
		id := "IEA"
		switch {
		case set != nil:
			id = "SE"
		case group != nil:
			id = "GE"
		}
		return nil, syntaxErr(pos+1, id, "missing %s (truncated?)", id)
	}
	return ic, nil
}

func segID(piece []byte, elem byte) string {
	id, _, _ := bytes.Cut(piece, []byte{elem})
	if len(id) > 3 {
		id = id[:3]
	}
	return string(id)
}

func isAlnum(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
}

func validID(id string) bool {
	if len(id) < 2 || len(id) > 3 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// ControlNumber returns the interchange control number, ISA13.
func (ic *Interchange) ControlNumber() string { return ic.ISA[13] }

// TransactionSets returns the number of transaction sets in all groups.
func (ic *Interchange) TransactionSets() int {
	n := 0
	for _, g := range ic.Groups {
		n += len(g.Sets)
	}
	return n
}

// Bytes returns the interchange as X12 text, with its separators and line
// breaks.
func (ic *Interchange) Bytes() []byte {
	var b bytes.Buffer
	ic.write(&b, ic.ISA)
	for _, g := range ic.Groups {
		ic.write(&b, g.GS)
		for _, s := range g.Sets {
			for _, seg := range s.Segments {
				ic.write(&b, seg)
			}
		}
		ic.write(&b, g.GE)
	}
	ic.write(&b, ic.IEA)
	return b.Bytes()
}

func (ic *Interchange) write(b *bytes.Buffer, seg Segment) {
	for i, e := range seg {
		if i > 0 {
			b.WriteByte(ic.Separators.Element)
		}
		b.WriteString(e)
	}
	b.WriteByte(ic.Separators.Segment)
	b.WriteString(ic.lineEnd)
}

// Control number ranges, X12 envelope specifications: ISA13 is 9 digits,
// GS06 1 to 9 digits, ST02 4 to 9 characters.
const (
	maxControl = 999_999_999
)

// wrapControl maps any n into 1..maxControl, keeping 1..maxControl as is.
func wrapControl(n int) int {
	m := (n - 1) % maxControl
	if m < 0 {
		m += maxControl
	}
	return m + 1
}

// Renumber returns a copy of the interchange as X12 text with new control
// numbers: ISA13 and IEA02 = interchange (9 digits, zero-padded); the groups'
// GS06 and GE02 = group, group+1, ...; the sets' ST02 and SE02 = set, set+1,
// ... across the whole interchange (at least 4 digits, zero-padded). The
// counts IEA01, GE01 and SE01 are rewritten, so the copy of a valid
// interchange validates. Numbers outside 1..999999999 are wrapped into it.
// The receiver is not modified.
func (ic *Interchange) Renumber(interchange, group, set int) []byte {
	cp := &Interchange{Separators: ic.Separators, lineEnd: ic.lineEnd}
	icn := fmt.Sprintf("%09d", wrapControl(interchange))
	cp.ISA = cloneSeg(ic.ISA)
	cp.ISA[13] = icn
	cp.IEA = Segment{"IEA", fmt.Sprint(len(ic.Groups)), icn}
	setN := set
	for gi, g := range ic.Groups {
		gcn := fmt.Sprint(wrapControl(group + gi))
		ng := Group{GS: cloneSeg(g.GS)}
		setElem(&ng.GS, 6, gcn)
		for _, s := range g.Sets {
			scn := fmt.Sprintf("%04d", wrapControl(setN))
			setN++
			segs := append([]Segment(nil), s.Segments...)
			segs[0] = cloneSeg(segs[0])
			setElem(&segs[0], 2, scn)
			segs[len(segs)-1] = Segment{"SE", fmt.Sprint(len(segs)), scn}
			ng.Sets = append(ng.Sets, TransactionSet{Segments: segs})
		}
		ng.GE = Segment{"GE", fmt.Sprint(len(g.Sets)), gcn}
		cp.Groups = append(cp.Groups, ng)
	}
	return cp.Bytes()
}

func cloneSeg(s Segment) Segment { return append(Segment(nil), s...) }

// setElem sets element n, growing the segment if needed.
func setElem(s *Segment, n int, v string) {
	for len(*s) <= n {
		*s = append(*s, "")
	}
	(*s)[n] = v
}

// LoadDir parses and validates every *.x12 file in dir, in name order. The
// error names the file; it wraps [ErrNoFiles] if there is none.
func LoadDir(dir string) ([]*Interchange, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.x12"))
	if err != nil {
		return nil, fmt.Errorf("x12: %w", err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoFiles, dir)
	}
	sort.Strings(names)
	out := make([]*Interchange, 0, len(names))
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("x12: %w", err)
		}
		ic, err := Parse(data)
		if err == nil {
			err = ic.Validate()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(name), err)
		}
		out = append(out, ic)
	}
	return out, nil
}

// ControlNumberOf returns ISA13 of the interchange at the start of data
// without parsing the rest: a cheap way to identify a payload. It returns an
// error wrapping [ErrSyntax] if data does not start with an ISA.
func ControlNumberOf(data []byte) (string, error) {
	data = bytes.TrimLeft(data, " \t\r\n")
	if len(data) < isaLen || !bytes.HasPrefix(data, []byte("ISA")) {
		return "", syntaxErr(1, "ISA", "not an X12 interchange")
	}
	f := strings.Split(string(data[:isaLen-1]), string(data[3]))
	if len(f) != 17 {
		return "", syntaxErr(1, "ISA", "has %d elements, want 16", len(f)-1)
	}
	return f[13], nil
}
