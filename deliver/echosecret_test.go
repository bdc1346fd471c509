package deliver_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/floodgate-go/floodgate/deliver/as2"
	"github.com/floodgate-go/floodgate/deliver/as2/as2test"
	"github.com/floodgate-go/floodgate/deliver/webhook"
)

// echoPath answers 404 with the request's path, query and a custom header,
// as common frameworks' error pages do: Express ("Cannot POST /path"),
// Spring Boot ({"path": "/path"}), and a gateway that echoes a header whose
// name is no credential name.
func echoPath(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "Cannot POST %s\n", r.URL.RequestURI())
		fmt.Fprintf(w, `{"status":404,"error":"Not Found","path":%q}`+"\n", r.URL.Path)
		fmt.Fprintf(w, "X-Tenant: %s\n", r.Header.Get("X-Tenant"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSendErrorHidesEchoedURLSecrets: a partner whose error page echoes
// the request's path, query or extra header puts none of the secrets of
// the URL (path segments, query values) or of webhook.Config.Header into
// the send error, which the retry queue stores as last_error. Checked for
// the webhook and the AS2 sender.
func TestSendErrorHidesEchoedURLSecrets(t *testing.T) {
	const (
		pathSecret  = "XXXXSECRETq8Zx3kPl0aB9"
		querySecret = "QQQQSECRETz7Yw2jOk9bA8"
		tenant      = "tenant-canary-4f9e2c"
	)
	srv := echoPath(t)
	url := srv.URL + "/services/T0001/B0002/" + pathSecret + "?code=" + querySecret

	ws, err := webhook.NewSender(webhook.Config{URL: url, Header: http.Header{"X-Tenant": {tenant}}})
	if err != nil {
		t.Fatal(err)
	}
	werr := ws.Send(context.Background(), "m-1", []byte(`{}`))

	pki, err := as2test.New("EchoSender", "EchoPartner")
	if err != nil {
		t.Fatal(err)
	}
	as, err := as2.NewSender(pki.SenderConfig(url))
	if err != nil {
		t.Fatal(err)
	}
	_, aerr := as.Send(context.Background(), "m-1", []byte("ISA~"))

	for name, err := range map[string]error{"webhook": werr, "as2": aerr} {
		if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "Cannot POST") {
			t.Errorf("%s: error %v, want the 404 quoted", name, err)
			continue
		}
		for _, s := range []string{pathSecret, querySecret, tenant} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: error prints %q: %v", name, s, err)
			}
		}
	}
}
