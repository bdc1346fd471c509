// Package redact keeps credentials out of printed NATS URLs and errors.
package redact

import "strings"

// URL returns urls (one URL or a comma-separated list, with or without a
// scheme) with the user information of each, everything before its last
// '@', replaced by "REDACTED", so a user, password or token is never
// printed. Parts without '@' are returned trimmed and unchanged.
func URL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		parts[i] = part(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func part(p string) string {
	at := strings.LastIndex(p, "@")
	if at < 0 {
		return p
	}
	scheme := ""
	if j := strings.Index(p, "://"); j >= 0 && j < at {
		scheme = p[:j+3]
	}
	return scheme + "REDACTED@" + p[at+1:]
}

// Error returns err with every user information of urls removed from its
// text (a URL parse error quotes the URL it was given); errors.Is and
// errors.As still see err. It returns nil for a nil err.
func Error(err error, urls string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, p := range strings.Split(urls, ",") {
		p = strings.TrimSpace(p)
		at := strings.LastIndex(p, "@")
		if at < 0 {
			continue
		}
		user := p[:at]
		if j := strings.Index(user, "://"); j >= 0 {
			user = user[j+3:]
		}
		if user != "" {
			msg = strings.ReplaceAll(msg, user, "REDACTED")
		}
	}
	if msg == err.Error() {
		return err
	}
	return &redacted{msg: msg, err: err}
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
