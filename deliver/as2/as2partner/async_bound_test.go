package as2partner_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/deliver/as2/as2partner"
)

// The answer of the receipt URL is read up to Async.MaxResponseSize and no
// further: a receipt URL that answers an endless body (here 256 MiB) gets
// its connection closed, so it writes little more than the sockets'
// buffers. Without the bound the partner reads all 256 MiB.
func TestAsyncReceiptResponseBounded(t *testing.T) {
	const offered = 256 << 20
	var written atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		chunk := make([]byte, 32<<10)
		for written.Load() < offered {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(rcv.Close)
	p, srv := asyncPartner(t, as2partner.AsyncConfig{AllowURLs: []string{rcv.URL}, Hold: true,
		MaxResponseSize: 1 << 10, Timeout: time.Minute}) // the timeout is a hang guard only
	h := validHeaders()
	h.Set("Receipt-Delivery-Option", rcv.URL+"/mdn")
	if code, _ := post(t, srv.URL, h, "payload"); code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	if n, err := p.PostReceipts(context.Background()); n != 1 || err != nil {
		t.Fatalf("PostReceipts = %d, %v; want the MDN posted", n, err)
	}
	// The handler stops once a write fails; wait for it before reading the
	// count (Close waits for it).
	rcv.Close()
	if got := written.Load(); got >= 64<<20 {
		t.Errorf("the receipt URL wrote %d of %d bytes: the answer was read beyond MaxResponseSize", got, offered)
	}
	t.Logf("the receipt URL wrote %d of %d bytes offered", written.Load(), offered)
}
