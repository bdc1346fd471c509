package as2partner_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
)

// A receipt post answered 503 (the receipt endpoint cannot take it yet, as
// floodgate's does for an MDN that may be early) is posted again, up to
// Retries times; a 4xx is final.
func TestAsyncReceiptRetriedOn5xx(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		want   int // posts made
	}{
		{"503 then 200", http.StatusServiceUnavailable, 3},
		{"404 is final", http.StatusNotFound, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var rcv *receiver
			rcv = newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
				if rcv.hits.Load() < 3 {
					http.Error(w, "not yet", tt.status)
				}
			})
			p, srv := asyncPartner(t, as2partner.AsyncConfig{AllowURLs: []string{rcv.srv.URL}, Retries: 5, RetryDelay: 10 * time.Millisecond})
			h := validHeaders()
			h.Set("Receipt-Delivery-Option", rcv.srv.URL)
			if code, _ := post(t, srv.URL, h, "payload"); code != http.StatusOK {
				t.Fatalf("HTTP %d", code)
			}
			deadline := time.Now().Add(10 * time.Second)
			for st := p.AsyncStats(); st.Posted+st.Failed < tt.want || (tt.status >= 500 && st.Posted != 1); st = p.AsyncStats() {
				if time.Now().After(deadline) {
					t.Fatalf("stats %+v after 10 s; want %d posts", st, tt.want)
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // room for a wrong extra retry (RetryDelay 10 ms) to show
			if got := rcv.hits.Load(); got != int64(tt.want) {
				t.Fatalf("%d posts, want %d", got, tt.want)
			}
		})
	}
}

// Close ends the receipt posts waiting for Delay or for a retry (here an
// hour away), and returns once they have ended.
func TestCloseStopsAsyncPosts(t *testing.T) {
	for _, tt := range []struct {
		name  string
		ac    func(url string) as2partner.AsyncConfig
		posts int64 // posts made before Close
	}{
		{"waiting for Delay", func(url string) as2partner.AsyncConfig {
			return as2partner.AsyncConfig{AllowURLs: []string{url}, Delay: time.Hour}
		}, 0},
		{"waiting for a retry", func(url string) as2partner.AsyncConfig {
			return as2partner.AsyncConfig{AllowURLs: []string{url}, Retries: 100, RetryDelay: time.Hour}
		}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "down", http.StatusServiceUnavailable)
			})
			p, srv := asyncPartner(t, tt.ac(rcv.srv.URL))
			h := validHeaders()
			h.Set("Receipt-Delivery-Option", rcv.srv.URL)
			if code, _ := post(t, srv.URL, h, "payload"); code != http.StatusOK {
				t.Fatalf("HTTP %d", code)
			}
			for deadline := time.Now().Add(10 * time.Second); rcv.hits.Load() < tt.posts; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d posts after 10 s; want %d", rcv.hits.Load(), tt.posts)
				}
			}
			closed := make(chan struct{})
			go func() { p.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(30 * time.Second): // a hang guard: the wait left is an hour
				t.Fatal("Close did not return: a post is still waiting")
			}
			if got := rcv.hits.Load(); got != tt.posts {
				t.Fatalf("%d posts; want %d", got, tt.posts)
			}
			p.Close() // again: a no-op
		})
	}
}
