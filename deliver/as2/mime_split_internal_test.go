package as2

import (
	"errors"
	"reflect"
	"testing"
)

// TestSplitMultipartRule: the one splitter's rule (RFC 2046 §5.1.1, liberal
// in line endings): which lines are delimiters, what each part holds, and
// which bodies are refused.
func TestSplitMultipartRule(t *testing.T) {
	tests := []struct {
		name, body string
		want       []string // nil: refused with ErrMalformedMIME
	}{
		{"CRLF", "--B\r\na\r\n--B\r\nb\r\n--B--\r\n", []string{"a", "b"}},
		{"LF", "--B\na\n--B\nb\n--B--\n", []string{"a", "b"}},
		{"mixed line endings", "--B\r\na\n--B\r\nb\r\n--B--", []string{"a", "b"}},
		{"transport padding", "--B \t\r\na\r\n--B\t\r\nb\r\n--B-- \r\n", []string{"a", "b"}},
		{"preamble line with text after the boundary", "pre\r\n--B x\r\n--B\r\na\r\n--B--", nil},
		{"preamble dropped", "pre\r\namble\r\n--B\r\na\r\n--B--\r\nepi\r\n--B\r\nlogue", []string{"a"}},
		{"epilogue not split", "--B\na\n--B--\n\r\n--B\r\nforged\r\n--B--\r\n", []string{"a"}},
		{"longer boundary is content", "--B\r\n--Bx\r\n--B--", []string{"--Bx"}},
		{"empty part", "--B\r\n--B\r\nb\r\n--B--", []string{"", "b"}},
		{"delimiter with text after it", "--B\r\na\r\n--B x\r\nb\r\n--B--\r\n", nil},
		{"close delimiter with text after it", "--B\r\na\r\n--B--x\r\nb\r\n--B--\r\n", nil},
		{"close delimiter with padded text after it", "--B\r\na\r\n--B-- x\r\n", nil},
		{"no body part", "--B--\r\n", nil},
		{"no closing delimiter", "--B\r\na\r\n", nil},
		{"no delimiter", "a\r\nb\r\n", nil},
		{"CR without LF is no line end", "--B\r\na\r--B--\r\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts, err := splitMultipart([]byte(tt.body), "B")
			if tt.want == nil {
				if !errors.Is(err, ErrMalformedMIME) {
					t.Fatalf("splitMultipart = %q, %v; want ErrMalformedMIME", parts, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(parts))
			for i, p := range parts {
				got[i] = string(p)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("splitMultipart = %q, want %q", got, tt.want)
			}
		})
	}
}
