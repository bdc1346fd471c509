package as2

import (
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"time"
	"unicode"
)

// Defaults applied by [NewSender] to zero fields of [Config].
const (
	DefaultContentType     = "application/EDI-X12"
	DefaultSubject         = "AS2 message"
	DefaultTimeout         = 30 * time.Second
	DefaultMessageIDDomain = "floodgate"
	DefaultMaxMDNSize      = 1 << 20 // 1 MiB
)

// defaultMaxIdleConnsPerHost is the idle connection pool of the default
// HTTPClient: enough for the concurrent sends of a busy partner.
const defaultMaxIdleConnsPerHost = 32

// Config describes one trading partner and how to send to it.
//
// Signing and encryption (certificates, keys, algorithms) will be added here
// as further optional fields; a Config without them sends unsigned and
// unencrypted.
type Config struct {
	// URL is the partner's AS2 endpoint. Required. An absolute http:// or
	// https:// URL.
	URL string
	// From is our AS2 ID, sent as AS2-From. Required. 1 to 128 printable
	// ASCII characters (RFC 4130 §6.2); quoted on the wire if it contains a
	// space, '"' or '\'.
	From string
	// To is the partner's AS2 ID, sent as AS2-To. Required. Same rules as From.
	To string
	// Subject is sent as the Subject header. Optional. Default "AS2 message".
	// No control characters; non-ASCII text is sent as an RFC 2047
	// encoded-word.
	Subject string
	// ContentType is the media type of the payload. Optional. Default
	// "application/EDI-X12" (RFC 1767). Use "application/EDIFACT" or
	// "application/xml" for other payloads.
	ContentType string
	// MDNTo is sent as Disposition-Notification-To, which asks the partner for
	// an MDN (RFC 4130 §7.3). Optional. Default: From. Printable ASCII; most
	// partners ignore its value for synchronous MDNs.
	MDNTo string
	// Timeout bounds one Send: connecting, sending, and waiting for the
	// synchronous MDN. Optional. Default 30s. Must not be negative. A
	// shorter deadline on the ctx passed to Send wins.
	Timeout time.Duration
	// HTTPClient sends the requests. Optional. Default: a client with its own
	// copy of http.DefaultTransport keeping up to 32 idle connections to the
	// partner, that does not follow redirects (a 3xx is a permanent failure:
	// the URL is wrong). Its own Timeout, if set, also applies.
	HTTPClient *http.Client
	// MessageIDDomain is the right part of every Message-ID,
	// "<id@MessageIDDomain>". Optional. Default "floodgate". A dot-atom
	// (RFC 5322 §3.6.4), e.g. "as2.example.com".
	MessageIDDomain string
	// MaxMDNSize bounds the response body read, in bytes; a larger response
	// is not an MDN. Optional. Default 1 MiB. Must not be negative.
	MaxMDNSize int64
}

func (c *Config) setDefaults() {
	if c.ContentType == "" {
		c.ContentType = DefaultContentType
	}
	if c.Subject == "" {
		c.Subject = DefaultSubject
	}
	if c.MDNTo == "" {
		c.MDNTo = c.From
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MessageIDDomain == "" {
		c.MessageIDDomain = DefaultMessageIDDomain
	}
	if c.MaxMDNSize == 0 {
		c.MaxMDNSize = DefaultMaxMDNSize
	}
	if c.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = defaultMaxIdleConnsPerHost
		c.HTTPClient = &http.Client{
			Transport:     t,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
}

// Validate reports the first invalid field, naming it, with an error wrapping
// one of [ErrURL], [ErrAS2ID], [ErrContentType], [ErrHeaderValue],
// [ErrMessageIDDomain] or [ErrNegative]. Zero optional fields are valid: they
// take their defaults.
func (c Config) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("Config.URL %q: %w", c.URL, ErrURL)
	}
	if !ValidAS2ID(c.From) {
		return fmt.Errorf("Config.From %q: %w", c.From, ErrAS2ID)
	}
	if !ValidAS2ID(c.To) {
		return fmt.Errorf("Config.To %q: %w", c.To, ErrAS2ID)
	}
	if hasControl(c.Subject) {
		return fmt.Errorf("Config.Subject %q: %w", c.Subject, ErrHeaderValue)
	}
	if c.ContentType != "" {
		if _, _, err := mime.ParseMediaType(c.ContentType); err != nil || hasControl(c.ContentType) {
			return fmt.Errorf("Config.ContentType %q: %w", c.ContentType, ErrContentType)
		}
	}
	if c.MDNTo != "" && !printableASCII(c.MDNTo) {
		return fmt.Errorf("Config.MDNTo %q: %w; printable ASCII only", c.MDNTo, ErrHeaderValue)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("Config.Timeout %v: %w", c.Timeout, ErrNegative)
	}
	if c.MessageIDDomain != "" && !isDotAtom(c.MessageIDDomain) {
		return fmt.Errorf("Config.MessageIDDomain %q: %w", c.MessageIDDomain, ErrMessageIDDomain)
	}
	if c.MaxMDNSize < 0 {
		return fmt.Errorf("Config.MaxMDNSize %d: %w", c.MaxMDNSize, ErrNegative)
	}
	return nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
