package redact

import (
	"net/url"
	"strings"
)

// Path returns the URL path p with every segment that may be a secret
// replaced by [Marker]. Webhook services put the secret in the path
// (Slack's /services/T…/B…/<secret>, Discord's /api/webhooks/<id>/<token>),
// so a printed URL keeps only the segments that look like words: at most 3
// bytes ("as2", "v1"), or lower-case ASCII letters with '-', '_' and '.'
// only, at most 32 bytes ("services", "orders", "edi-inbound"). Every other
// segment (one with a digit, an upper-case letter, base64 or percent
// signs, or a long run of letters) is replaced.
//
// The rule errs toward hiding: IDs such as "T0001" are hidden too. A
// secret made of lower-case letters alone is not recognised; such a secret
// belongs in a header (webhook.Config.Header), which is never printed.
func Path(p string) string {
	if p == "" || p == "/" {
		return p
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if !wordLike(s) {
			segs[i] = Marker
		}
	}
	return strings.Join(segs, "/")
}

func wordLike(s string) bool {
	if len(s) <= 3 {
		return true
	}
	if len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// URLError returns err with the URL of a *url.Error at its top (what
// http.Client.Do returns: `Post "https://…": …`) passed through [HTTPURL],
// so a transport error never prints a secret of the partner URL; errors.Is
// and errors.As still see its cause. Other errors are returned as they
// are; nil gives nil.
func URLError(err error) error {
	ue, ok := err.(*url.Error)
	if !ok {
		return err
	}
	c := *ue
	c.URL = HTTPURL(ue.URL)
	return &c
}
