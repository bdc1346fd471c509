package asyncmdn_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/deliver/as2/asyncmdn"
)

// report returns a disposition-notification report (unsigned entity, CRLF)
// for messageID with the disposition given.
func report(messageID, disposition string) []byte {
	const b = "forged-report-boundary"
	return []byte(strings.ReplaceAll(fmt.Sprintf(`Content-Type: multipart/report; report-type=disposition-notification; boundary="%s"

--%s
Content-Type: text/plain

The message was received.
--%s
Content-Type: message/disposition-notification

Reporting-UA: rogue
Original-Recipient: rfc822; partner
Final-Recipient: rfc822; partner
Original-Message-ID: %s
Disposition: automatic-action/MDN-sent-automatically; %s

--%s--
`, b, b, b, messageID, disposition, b), "\n", "\r\n"))
}

// TestOtherPartnerCannotResolveReceipt: one endpoint serves two partners.
// The second partner, holding a genuine key of its own, signs MDNs naming a
// message sent to the first: a failure (which would dead-letter it, and an
// operator's resend would duplicate the order) and a success (which would
// mark it received). Each is refused 403, nothing is resolved or
// dead-lettered, and the first partner's own MDN still resolves it.
func TestOtherPartnerCannotResolveReceipt(t *testing.T) {
	e := newEnv(t, nil)
	r := e.replica("", nil)
	e.sendAsync(r, "order-1")
	id := as2.MessageID("order-1", as2.DefaultMessageIDDomain)

	rogue, err := as2test.New("floodgate", "rogue")
	if err != nil {
		t.Fatal(err)
	}
	ocfg := r.sender.Config()
	ocfg.To, ocfg.MDNCert, ocfg.EncryptionCert = "rogue", rogue.Partner.Cert, rogue.Partner.Cert
	other, err := as2.NewSender(ocfg)
	if err != nil {
		t.Fatal(err)
	}
	store := e.store(e.js, e.bucket)
	res, err := asyncmdn.New(asyncmdn.Config{Store: store, Senders: []*as2.Sender{r.sender, other}, Queue: e.q})
	if err != nil {
		t.Fatal(err)
	}
	for _, disp := range []string{"failed/failure: unexpected-processing-error", "processed"} {
		ct, body, err := as2.SignEntity(report(id, disp), rogue.Partner.Cert, rogue.Partner.Key, "sha256")
		if err != nil {
			t.Fatal(err)
		}
		a := res.Resolve(testCtx(t), ct, body)
		if a.Status != http.StatusForbidden {
			t.Errorf("%s signed by another partner: %+v, want 403", disp, a)
		}
	}
	if !e.pending(store, "order-1") || len(e.deadLetters()) != 0 {
		t.Fatal("another partner's MDN resolved or dead-lettered the receipt")
	}
	if n, err := e.partner.PostReceipts(testCtx(t)); n != 1 || err != nil {
		t.Fatalf("the partner's own MDN: %d, %v", n, err)
	}
	if e.pending(store, "order-1") || len(e.deadLetters()) != 0 {
		t.Fatal("the partner's own MDN did not resolve the receipt")
	}
}
