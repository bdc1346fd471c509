package as2_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
)

func TestAS2IDs(t *testing.T) {
	tests := []struct {
		id     string
		valid  bool
		quoted string
	}{
		{"NORTHWINDRTL", true, "NORTHWINDRTL"},
		{"ZZ:0123456789", true, "ZZ:0123456789"},
		{"Northwind Retail", true, `"Northwind Retail"`},
		{`say "hi"`, true, `"say \"hi\""`},
		{`back\slash`, true, `"back\\slash"`},
		{strings.Repeat("A", 128), true, strings.Repeat("A", 128)},
		{strings.Repeat("A", 129), false, ""},
		{"", false, ""},
		{"tab\there", false, ""},
		{"caf\u00e9", false, ""},
	}
	for _, tt := range tests {
		if got := as2.ValidAS2ID(tt.id); got != tt.valid {
			t.Errorf("ValidAS2ID(%q) = %v", tt.id, got)
		}
		if !tt.valid {
			continue
		}
		q := as2.QuoteAS2ID(tt.id)
		if q != tt.quoted {
			t.Errorf("QuoteAS2ID(%q) = %s, want %s", tt.id, q, tt.quoted)
		}
		back, err := as2.ParseAS2ID(" " + q + " ")
		if err != nil || back != tt.id {
			t.Errorf("ParseAS2ID(%s) = %q, %v; want %q", q, back, err, tt.id)
		}
	}
	for _, bad := range []string{"", "two words", `"unterminated`, `"bad \escape"`, `"inner " quote"`, `""`} {
		if id, err := as2.ParseAS2ID(bad); !errors.Is(err, as2.ErrAS2ID) {
			t.Errorf("ParseAS2ID(%s) = %q, %v; want ErrAS2ID", bad, id, err)
		}
	}
}

func TestComputeMIC(t *testing.T) {
	tests := []struct{ alg, want string }{
		{"sha-256", "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=, sha-256"},
		{"SHA256", "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=, SHA256"},
		{"sha1", "qZk+NkcGgWq6PiVxeFDCbJzQ2J0=, sha1"},
		{"md5", "kAFQmDzST7DWlj99KOF/cg==, md5"},
		{"sha-512", "3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUyknw==, sha-512"},
	}
	for _, tt := range tests {
		got, err := as2.ComputeMIC(tt.alg, []byte("abc"))
		if err != nil || got != tt.want {
			t.Errorf("ComputeMIC(%s) = %q, %v; want %q", tt.alg, got, err, tt.want)
		}
	}
	if _, err := as2.ComputeMIC("crc32", []byte("abc")); !errors.Is(err, as2.ErrMICAlgorithm) {
		t.Errorf("ComputeMIC(crc32) = %v, want ErrMICAlgorithm", err)
	}
	d, alg, err := as2.ParseMIC(" ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0= ,\tsha-256 ")
	if err != nil || d != "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=" || alg != "sha-256" {
		t.Errorf("ParseMIC = %q %q %v", d, alg, err)
	}
	for _, bad := range []string{"", "abc", ", sha-256", "abc,"} {
		if _, _, err := as2.ParseMIC(bad); !errors.Is(err, as2.ErrMalformedMDN) {
			t.Errorf("ParseMIC(%q) = %v", bad, err)
		}
	}
}
