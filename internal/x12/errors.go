package x12

import (
	"errors"
	"fmt"
)

var (
	// ErrSyntax: the data is not an X12 interchange (bad ISA, delimiters or
	// envelope nesting). Returned wrapped by [Parse].
	ErrSyntax = errors.New("x12: syntax error")
	// ErrInvalid: the interchange parses but its counts or control numbers do
	// not agree. Returned wrapped by [Interchange.Validate].
	ErrInvalid = errors.New("x12: invalid interchange")
	// ErrNoFiles: [LoadDir] found no *.x12 file.
	ErrNoFiles = errors.New("x12: no *.x12 files")
)

// SegmentError locates an error in an interchange. It Is [ErrSyntax] or
// [ErrInvalid] (its Kind).
type SegmentError struct {
	// Pos is the segment's 1-based position in the interchange (ISA is 1).
	Pos int
	// ID is the segment ID, e.g. "SE".
	ID string
	// Reason says what is wrong, naming the element, e.g. "SE01 is 12, want 13".
	Reason string
	// Kind is ErrSyntax or ErrInvalid.
	Kind error
}

// Error returns "x12: segment <pos> (<id>): <reason>".
func (e *SegmentError) Error() string {
	return fmt.Sprintf("x12: segment %d (%s): %s", e.Pos, e.ID, e.Reason)
}

// Unwrap returns Kind.
func (e *SegmentError) Unwrap() error { return e.Kind }

func syntaxErr(pos int, id, format string, args ...any) error {
	return &SegmentError{Pos: pos, ID: id, Reason: fmt.Sprintf(format, args...), Kind: ErrSyntax}
}

func invalidErr(pos int, id, format string, args ...any) error {
	return &SegmentError{Pos: pos, ID: id, Reason: fmt.Sprintf(format, args...), Kind: ErrInvalid}
}
