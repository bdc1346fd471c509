package webhook

import (
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/floodgate-go/floodgate/internal/redact"
)

// Format is how a payload goes into the request body.
type Format int

const (
	// FormatJSON posts the payload as application/json; it must be valid
	// JSON (encoding/json.Valid), or Send fails permanently with
	// [ErrInvalidJSON].
	FormatJSON Format = iota
	// FormatRaw posts the payload as it is, with Config.ContentType.
	FormatRaw
)

// String returns "json" or "raw".
func (f Format) String() string {
	switch f {
	case FormatJSON:
		return "json"
	case FormatRaw:
		return "raw"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Defaults applied by [NewSender] to zero fields of [Config].
const (
	DefaultTimeout        = 10 * time.Second
	DefaultRawContentType = "application/octet-stream"
)

// defaultMaxIdleConnsPerHost is the idle connection pool of the default
// HTTPClient.
const defaultMaxIdleConnsPerHost = 32

// Config describes one webhook endpoint.
type Config struct {
	// URL is the endpoint. Required. An absolute http:// or https:// URL.
	URL string
	// BodyFormat is FormatJSON or FormatRaw. Optional. Default FormatJSON.
	// (Named BodyFormat so that Config can implement fmt.Formatter.)
	BodyFormat Format
	// ContentType is the Content-Type of FormatRaw requests. Optional.
	// Default "application/octet-stream". Ignored for FormatJSON, which is
	// always "application/json".
	ContentType string
	// Secret is the key of the HMAC-SHA256 signatures ([Sign],
	// [SignFloodgate]): the key bytes, as [ParseSecret] decodes a "whsec_"
	// secret; give consumers [FormatSecret] of it. Optional: nil or empty
	// sends no timestamp and signature headers. With Standard Webhooks
	// (SchemeStandardWebhooks, SchemeBoth) it must be 24 to 64 bytes
	// (MinSecretLen, MaxSecretLen; spec "Signature scheme"); use 32 random
	// bytes. With SchemeFloodgate any length is accepted.
	Secret []byte
	// Scheme is the signature headers sent: SchemeStandardWebhooks
	// (webhook-id, webhook-timestamp, webhook-signature), SchemeFloodgate
	// (X-Floodgate-Timestamp, X-Floodgate-Signature) or SchemeBoth (all of
	// them, for consumers migrating; one Secret signs both). Optional.
	// Default SchemeStandardWebhooks. Idempotency-Key is always sent, and
	// webhook-id whenever Standard Webhooks is, signed or not.
	Scheme Scheme
	// Timeout bounds one Send: connecting, sending and reading the response.
	// Optional. Default 10s. Must not be negative. A shorter deadline on the
	// ctx passed to Send wins.
	Timeout time.Duration
	// Header holds extra request headers (an API key, a tenant id). Optional.
	// It must not set Content-Type, Idempotency-Key or the signature headers.
	Header http.Header
	// HTTPClient sends the requests. Optional. Default: a client with its own
	// copy of http.DefaultTransport keeping up to 32 idle connections, that
	// does not follow redirects (a 3xx is a permanent failure).
	HTTPClient *http.Client
	// Now tells the time of the signature timestamp. Optional. Default
	// time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ContentType == "" {
		c.ContentType = DefaultRawContentType
	}
	if c.BodyFormat == FormatJSON {
		c.ContentType = "application/json"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = defaultMaxIdleConnsPerHost
		c.HTTPClient = &http.Client{
			Transport:     t,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	c.Header = c.Header.Clone()
	c.Secret = append([]byte(nil), c.Secret...)
}

// reserved are the headers the sender sets itself.
var reserved = []string{"Content-Type", "Content-Length", "Host", HeaderIdempotencyKey,
	HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature, HeaderTimestamp, HeaderSignature}

// Validate reports whether c, with defaults applied to its zero fields, is
// valid: the check [NewSender] makes. It does not modify c. The error names
// the field and wraps the sentinel that states its allowed range: [ErrURL],
// [ErrFormat], [ErrContentType], [ErrHeader], [ErrNegative], [ErrScheme]
// or [ErrSecret] (whose message gives the length, never the secret). A malformed
// ContentType is reported even with FormatJSON, which ignores it.
func (c Config) Validate() error {
	given := c.ContentType
	c.setDefaults()
	if c.BodyFormat == FormatJSON {
		c.ContentType = given
	}
	return c.validate()
}

// validate requires defaults set, but for FormatJSON takes ContentType as
// given (possibly empty).
func (c *Config) validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("Config.URL %q: %w", redact.HTTPURL(c.URL), ErrURL)
	}
	if c.BodyFormat != FormatJSON && c.BodyFormat != FormatRaw {
		return fmt.Errorf("Config.BodyFormat %v: %w", c.BodyFormat, ErrFormat)
	}
	if c.ContentType != "" {
		if _, _, err := mime.ParseMediaType(c.ContentType); err != nil || !validHeaderValue(c.ContentType) {
			return fmt.Errorf("Config.ContentType %q: %w", c.ContentType, ErrContentType)
		}
	}
	if !c.Scheme.valid() {
		return fmt.Errorf("Config.Scheme %v: %w", c.Scheme, ErrScheme)
	}
	if n := len(c.Secret); n > 0 && c.Scheme.standard() && (n < MinSecretLen || n > MaxSecretLen) {
		return fmt.Errorf("Config.Secret: %w: %d bytes, want %d to %d with %v (or empty: unsigned)", ErrSecret, n, MinSecretLen, MaxSecretLen, c.Scheme)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("Config.Timeout %v: %w", c.Timeout, ErrNegative)
	}
	for name, values := range c.Header {
		if !validHeaderName(name) {
			return fmt.Errorf("Config.Header %q: %w: bad name", name, ErrHeader)
		}
		for _, r := range reserved {
			if strings.EqualFold(name, r) {
				return fmt.Errorf("Config.Header %q: %w: set by the sender", name, ErrHeader)
			}
		}
		for _, v := range values {
			if !validHeaderValue(v) {
				return fmt.Errorf("Config.Header %q: %w: bad value %q", name, ErrHeader, v)
			}
		}
	}
	return nil
}

// validHeaderName reports whether s is an RFC 9110 §5.6.2 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s holds no control character other than
// horizontal tab (RFC 9110 §5.5).
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
