// Package leaktest checks that secrets do not appear in printed output:
// the forms a secret can take ([Forms], [KeyForms]) and every printed form
// of a value ([Printed]).
package leaktest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

// Verbs are the fmt verbs [Printed] prints a value with.
var Verbs = []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"}

// Forms returns the forms secret s can take in text: raw, base64 (standard
// and URL alphabets, padded or not), hex (lower and upper case), and the
// decimal bytes fmt prints for a []byte.
func Forms(s []byte) []string {
	out := []string{string(s), hex.EncodeToString(s), strings.ToUpper(hex.EncodeToString(s))}
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		out = append(out, e.EncodeToString(s))
	}
	if len(s) > 1 {
		out = append(out, strings.Trim(fmt.Sprint(s), "[]"))
	}
	return out
}

// KeyForms returns the forms of a private key: [Forms] of its PKCS #8 DER,
// the first line of its PEM body, and its private scalar (RSA D and
// primes, ECDSA D) in decimal and hex.
func KeyForms(t testing.TB, key crypto.Signer) []string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	out := Forms(der)
	body := strings.Split(string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "\n")
	out = append(out, body[1], body[len(body)-3]) // a full line and the last (short) one
	switch k := key.(type) {
	case *rsa.PrivateKey:
		out = append(out, k.D.String(), k.D.Text(16))
		for _, p := range k.Primes {
			out = append(out, p.String(), p.Text(16))
		}
	case *ecdsa.PrivateKey:
		b, err := k.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Forms(b)...)
	}
	return out
}

// Printed returns v printed every way a secret could reach a log: with
// each of [Verbs] (and the same for a pointer to it), encoding/json, and
// slog's text and JSON handlers.
func Printed(v any) map[string]string {
	out := map[string]string{}
	ptr := reflect.New(reflect.TypeOf(v))
	ptr.Elem().Set(reflect.ValueOf(v))
	for _, verb := range Verbs {
		out[verb] = fmt.Sprintf(verb, v)
		out["&"+verb] = fmt.Sprintf(verb, ptr.Interface())
		out["[]"+verb] = fmt.Sprintf(verb, []any{v})
	}
	b, err := json.Marshal(v)
	out["json"] = string(b) + fmt.Sprint(err)
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"slog text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"slog json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		slog.New(h(&buf)).Info("config", "cfg", v, slog.Group("g", "cfg", v))
		out[name] = buf.String()
	}
	return out
}

// Check fails t for every form in forms found in text, naming where.
func Check(t testing.TB, where, text string, forms []string) {
	t.Helper()
	for _, f := range forms {
		if len(f) >= 4 && strings.Contains(text, f) {
			t.Errorf("%s holds the secret form %.24q...: %.300s", where, f, text)
		}
	}
}

// CheckPrinted runs [Check] over every form of [Printed](v), and fails if
// a form does not hold want (the proof that the value was printed). Hex
// forms are not searched for want; nor, when v is a pointer (a Sender,
// whose fields are unexported), its JSON forms and the forms of a pointer
// to it.
func CheckPrinted(t testing.TB, v any, want string, forms []string) {
	t.Helper()
	isPtr := reflect.TypeOf(v).Kind() == reflect.Pointer
	for how, text := range Printed(v) {
		Check(t, how, text, forms)
		skip := strings.Contains(how, "%x") || strings.Contains(how, "%X") ||
			isPtr && (strings.HasPrefix(how, "&") || strings.Contains(how, "json"))
		if !skip && !strings.Contains(text, want) {
			t.Errorf("%s does not show %q: %.300s", how, want, text)
		}
	}
}
