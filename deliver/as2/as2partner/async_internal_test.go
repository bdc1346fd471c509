package as2partner

import "testing"

// TestAsyncAllowedRejectsEncodedTraversal: a receipt URL that hides a dot,
// slash or backslash behind percent-encoding is refused, so it cannot climb
// out of the allowed path on a server that decodes before cleaning.
func TestAsyncAllowedRejectsEncodedTraversal(t *testing.T) {
	c := AsyncConfig{AllowURLs: []string{"https://mdn.example.com/as2/mdn"}}
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"https://mdn.example.com/as2/mdn", true},
		{"https://mdn.example.com/as2/mdn/receipts/1", true},
		{"https://mdn.example.com/as2/mdn/a%20b", true},
		{"https://mdn.example.com/as2/mdn/../admin", false},
		{"https://mdn.example.com/as2/mdnx", false},
		{"https://mdn.example.com/as2/mdn/%2e%2e/%2e%2e/admin", false},
		{"https://mdn.example.com/as2/mdn/%2E%2E/%2E%2E/admin", false},
		{"https://mdn.example.com/as2/mdn/..%2f..%2fadmin", false},
		{"https://mdn.example.com/as2/mdn/..%2F..%2Fadmin", false},
		{"https://mdn.example.com/as2/mdn/..%5c..%5cadmin", false},
		{"https://mdn.example.com/as2/mdn/..%5C..%5Cadmin", false},
		{`https://mdn.example.com/as2/mdn/..\..\admin`, false},
		{"https://mdn.example.com/as2/%6ddn/x", true}, // %6d is 'm': decoded path is under /as2/mdn
	} {
		if got := c.allowed(tc.url); got != tc.want {
			t.Errorf("allowed(%q) = %v, want %v", tc.url, got, tc.want)
		}
	}
}
