package deliver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/deliver/webhook"
)

// TestURLPathSecretNotPrinted: a secret in a partner URL's path
// (Slack-style) appears neither in the printed config (fmt, JSON) nor in
// the transport error of a send nor in the validation error, for the
// webhook and the AS2 sender.
func TestURLPathSecretNotPrinted(t *testing.T) {
	const secret = "XXXXSECRETq8Zx3kPl0aB9"
	url := "http://127.0.0.1:1/T0001/B0002/" + secret // nothing listens on port 1
	bad := "ftp://hooks.example/T0001/B0002/" + secret
	var printed []string

	wcfg := webhook.Config{URL: url}
	ws, err := webhook.NewSender(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	werr := ws.Send(context.Background(), "m-1", []byte(`{}`))
	_, verr := webhook.NewSender(webhook.Config{URL: bad})
	j, _ := json.Marshal(wcfg)
	printed = append(printed, fmt.Sprintf("%v %+v %#v %s", wcfg, wcfg, ws, j), fmt.Sprint(werr), fmt.Sprint(verr))

	pki, err := as2test.New("PathSender", "PathPartner")
	if err != nil {
		t.Fatal(err)
	}
	acfg := pki.SenderConfig(url)
	as, err := as2.NewSender(acfg)
	if err != nil {
		t.Fatal(err)
	}
	_, aerr := as.Send(context.Background(), "m-1", []byte("ISA~"))
	_, averr := as2.NewSender(pki.SenderConfig(bad))
	j, _ = json.Marshal(acfg)
	printed = append(printed, fmt.Sprintf("%v %+v %s", acfg, acfg, j), fmt.Sprint(aerr), fmt.Sprint(averr))

	for _, p := range printed {
		if strings.Contains(p, secret) {
			t.Errorf("secret printed: %s", p)
		}
	}
	if werr == nil || aerr == nil || !strings.Contains(fmt.Sprint(werr), "127.0.0.1:1/REDACTED") {
		t.Errorf("sends: %v, %v; want transport errors naming the host, path redacted", werr, aerr)
	}
}
