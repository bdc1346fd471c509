package as2_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
)

// TestSendWireFormat talks to a hand-written HTTP/1.1 server over TCP: it
// checks the request exactly as it goes on the wire (header names spelled as
// in RFC 4130) and answers with a raw MDN carrying a folded Content-Type
// header and folded MDN fields.
func TestSendWireFormat(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type request struct {
		lines []string
		body  []byte
		err   error
	}
	got := make(chan request, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			got <- request{err: err}
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		var req request
		length := 0
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				got <- request{err: err}
				return
			}
			line = strings.TrimRight(line, "\r\n")
			if line == "" {
				break
			}
			req.lines = append(req.lines, line)
			if v, ok := strings.CutPrefix(strings.ToLower(line), "content-length: "); ok {
				length, _ = strconv.Atoi(v)
			}
		}
		req.body = make([]byte, length)
		if _, err := io.ReadFull(br, req.body); err != nil {
			got <- request{err: err}
			return
		}
		var msgID string
		for _, l := range req.lines {
			if v, ok := strings.CutPrefix(l, "Message-ID: "); ok {
				msgID = v
			}
		}
		mdn := strings.NewReplacer(
			"<5f0c1a7e-2b7d-4c51-9a57-6f2f3d1e9b10@floodgate>", msgID,
			"7v7F++fQaNWYUbkMzPh1H4Qgw0bJz0TG5S3RpU6L2QE=,\r\n sha-256", sha256MIC(req.body),
		).Replace(rawMDN)
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\n"+
			"Server: Bluewater AS2 Gateway\r\n"+
			"AS2-Version: 1.1\r\n"+
			"AS2-From: BLUEWATERHG\r\n"+
			"AS2-To: NORTHWINDRTL\r\n"+
			"Content-Type: multipart/report; report-type=disposition-notification;\r\n"+
			"\tboundary=\"----=_Part_17_1690273381.1710408600123\"\r\n"+
			"Content-Length: %d\r\n"+
			"Connection: close\r\n"+
			"\r\n%s", len(mdn), mdn)
		got <- req
	}()

	s := newSender(t, "http://"+l.Addr().String()+"/as2/receive", nil)
	body := payload(t)
	mdn, err := s.Send(context.Background(), testID, body)
	req := <-got
	if req.err != nil {
		t.Fatalf("server: %v", req.err)
	}
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if !mdn.Processed() || mdn.ReceivedContentMIC != sha256MIC(body) {
		t.Errorf("MDN = %+v", mdn)
	}
	if !strings.HasPrefix(req.lines[0], "POST /as2/receive HTTP/1.1") {
		t.Errorf("request line %q", req.lines[0])
	}
	want := []string{
		"AS2-Version: 1.2",
		"AS2-From: " + buyerID,
		"AS2-To: " + supplierID,
		"Message-ID: " + as2.MessageID(testID, "floodgate"),
		"MIME-Version: 1.0",
		"Disposition-Notification-To: " + buyerID,
		"Content-Type: application/EDI-X12",
		"Subject: Purchase order",
	}
	for _, w := range want {
		found := false
		for _, l := range req.lines {
			found = found || l == w
		}
		if !found {
			t.Errorf("request has no line %q; lines:\n%s", w, strings.Join(req.lines, "\n"))
		}
	}
	if string(req.body) != string(body) {
		t.Error("body on the wire is not the payload")
	}
}
