package as2

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"time"
	"unicode"

	"github.com/floodgate-go/floodgate/internal/redact"
)

// Defaults applied by [NewSender] to zero fields of [Config].
const (
	DefaultContentType     = "application/EDI-X12"
	DefaultSubject         = "AS2 message"
	DefaultTimeout         = 30 * time.Second
	DefaultMessageIDDomain = "floodgate"
	DefaultMaxMDNSize      = 1 << 20 // 1 MiB
)

// MDN modes, the values of [Config.MDNMode] (RFC 4130 §7.3), with
// [MDNAsync].
const (
	// MDNSync asks for a synchronous MDN, returned in the HTTP response.
	MDNSync = "sync"
	// MDNNone asks for no MDN: a 2xx answer is the delivery.
	MDNNone = "none"
	// MDNAsync is in async.go.
)

// defaultMaxIdleConnsPerHost is the idle connection pool of the default
// HTTPClient: enough for the concurrent sends of a busy partner.
const defaultMaxIdleConnsPerHost = 32

// Config describes one trading partner and how to send to it: the partner
// profile of RFC 4130 (AS2 IDs, URL, certificates, algorithms, timeouts).
//
// Security is optional and piecewise: SigningCert and SigningKey sign each
// message (multipart/signed, RFC 5751 §3.5.3), EncryptionCert encrypts it
// (application/pkcs7-mime enveloped-data, RFC 5751 §3.3), and MDNCert asks
// for a signed MDN and verifies it. A Config with none of them sends
// unsigned and unencrypted and asks for an unsigned MDN. [LoadProfile] fills
// the certificate fields from PEM files.
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

	// SigningCert is our certificate. With SigningKey it signs every
	// message, and it travels inside each signature. Optional: nil sends
	// unsigned messages. Required when SigningKey is set. Must be valid
	// (NotBefore <= now <= NotAfter) when the Sender is created.
	SigningCert *x509.Certificate
	// SigningKey is the private key of SigningCert: *rsa.PrivateKey or
	// *ecdsa.PrivateKey (or another crypto.Signer with such a public key).
	// Required when SigningCert is set; its public key must be SigningCert's.
	SigningKey crypto.Signer
	// SignAlgorithm is the digest of our signatures and of the MIC, and the
	// signed-receipt-micalg we ask for: [SignSHA256], [SignSHA384],
	// [SignSHA512] or [SignSHA1] ("sha-256" spellings are accepted).
	// Optional. Default sha256.
	SignAlgorithm string
	// EncryptionCert is the partner's certificate we encrypt to. Optional:
	// nil sends unencrypted messages. It must hold an RSA public key (RSA
	// key transport, RFC 3370 §4.2.1) and be valid when the Sender is
	// created.
	EncryptionCert *x509.Certificate
	// EncryptAlgorithm is the content encryption: [EncryptAES256CBC],
	// [EncryptAES128CBC] or [Encrypt3DES] (old partners only). Optional.
	// Default aes256-cbc. Ignored without EncryptionCert.
	EncryptAlgorithm string
	// MDNCert is the certificate the partner signs its MDNs with (often the
	// same as EncryptionCert). Optional: nil asks for an unsigned MDN (no
	// Disposition-Notification-Options header). When set, every request asks
	// for a signed MDN (RFC 4130 §7.3, "signed-receipt-protocol=optional,
	// pkcs7-signature; signed-receipt-micalg=optional, <SignAlgorithm>",
	// "required" with RequireSignedMDN), and an MDN whose signature does
	// not verify with exactly this certificate is a permanent failure; an
	// unsigned one or one without Received-Content-MIC is a warning or a
	// failure as RequireSignedMDN and RequireMIC say (see [Sender.Send]).
	// Must be valid when the Sender is created.
	MDNCert *x509.Certificate

	// NextMDNCert, NextEncryptionCert, NextEncryptionFrom, TrustRoots and
	// Now are the trust model and the certificate rollover: see trust.go
	// and [Sender.VerifyMDNAt].

	// NextMDNCert is the partner's next MDN-signing certificate, during its
	// certificate rollover: an MDN signed by MDNCert or by NextMDNCert is
	// accepted (each only within its validity period at the MDN's time).
	// Optional. Requires MDNCert (or TrustRoots). It may be not yet valid
	// when the Sender is created, but not expired.
	NextMDNCert *x509.Certificate
	// NextEncryptionCert is the partner's next encryption certificate:
	// from NextEncryptionFrom on (by Now) messages are encrypted to it,
	// before it to EncryptionCert. Optional. Requires EncryptionCert and
	// NextEncryptionFrom; an RSA certificate, valid at NextEncryptionFrom,
	// not expired when the Sender is created.
	NextEncryptionCert *x509.Certificate
	// NextEncryptionFrom is when NextEncryptionCert replaces
	// EncryptionCert (the partner's announced switch date). Required with
	// NextEncryptionCert; ignored without it.
	NextEncryptionFrom time.Time
	// TrustRoots selects the CA model: nil (the default) is the pinned
	// model, where an MDN must be signed by exactly MDNCert or NextMDNCert
	// (often self-signed), and nothing else is trusted. With a pool, every
	// partner certificate configured here (EncryptionCert, MDNCert and
	// their Next ones) must chain to it, checked when the Sender is
	// created, an MDN signer must be one of them or chain to it at the
	// MDN's time, and a signed MDN is asked for even without MDNCert.
	// Put the partner's private CA here, with any intermediate CA that
	// issues its certificates: every certificate it issued is accepted.
	// Optional.
	TrustRoots *x509.CertPool
	// Now tells the time that certificates are checked against: when the
	// Sender is created, at every MDN, and for the switch to
	// NextEncryptionCert. Optional. Default time.Now. Tests inject a
	// clock. Must be safe for concurrent use.
	Now func() time.Time

	// Compression compresses each message (CMS compressed-data, RFC 3274,
	// zlib) in the order named: [CompressBeforeSign] ("compress-sign") or
	// [CompressAfterSign] ("sign-compress"); encryption, if any, comes
	// last. The MIC follows RFC 5402 §4 for each order (see the constants).
	// Optional. Default [CompressNone] (""): no compression.
	Compression string

	// MDNMode is how the partner answers: [MDNSync] (the default) asks for
	// a synchronous MDN, and a 2xx answer without one is delivered,
	// unconfirmed (a [deliver.Warning], never resent: the partner has the
	// message); [MDNNone] asks for none (no Disposition-Notification-To),
	// and a 2xx answer is delivered, its body not read; [MDNAsync] asks for
	// the MDN at AsyncMDNURL and a 2xx answer is delivered once its
	// [PendingReceipt] is stored in Receipts. Optional. Default "sync".
	// [MDNNone] excludes MDNCert, RequireSignedMDN and RequireMIC.
	MDNMode string
	// AsyncMDNURL is where the partner posts asynchronous MDNs, sent as
	// Receipt-Delivery-Option (RFC 4130 §7.3): the URL of a receipt
	// endpoint (package asyncmdn) any replica serves. Required with
	// [MDNAsync], an absolute http:// or https:// URL without spaces or
	// commas; must be empty otherwise. Anyone who can reach that endpoint
	// can post to it, so [MDNAsync] needs MDNCert or TrustRoots (an
	// unsigned or unverifiable asynchronous MDN then resolves nothing: it
	// is refused, and the receipt stays pending until a signed one or the
	// deadline), unless AllowUnsignedAsyncMDN.
	AsyncMDNURL string
	// AllowUnsignedAsyncMDN lets [MDNAsync] run with neither MDNCert nor
	// TrustRoots, accepting unsigned asynchronous MDNs. The risk: anyone
	// who can reach the receipt endpoint and learns a Message-ID can mark
	// that message received or failed (an MDN is only trustworthy signed,
	// RFC 4130 §7.3, §9.2). Set it only for an endpoint on a network you
	// control, or a test. Optional. Default false: [Config.Validate]
	// refuses MDNMode async without MDNCert or TrustRoots. Ignored unless
	// [MDNAsync].
	AllowUnsignedAsyncMDN bool
	// AsyncMDNTimeout is how long after the partner's 2xx its asynchronous
	// MDN may arrive ([PendingReceipt.Deadline]); after it the message is
	// dead-lettered with reason "mdn-timeout", never resent. Optional.
	// Default 24h. Must not be negative. Ignored unless [MDNAsync].
	AsyncMDNTimeout time.Duration
	// Receipts stores pending receipts under [MDNAsync] ([ReceiptStore];
	// asyncmdn.Store on JetStream KV). Required with [MDNAsync]; must be
	// nil otherwise.
	Receipts ReceiptStore
	// RequireSignedMDN asks for a signed MDN as "required" rather than
	// "optional" (RFC 4130 §7.3, RFC 3798 §2.2), for a profile that demands
	// signed receipts: an unsigned MDN is then a permanent failure
	// ([ErrMDNUnsigned]). Without it an unsigned "processed" MDN is
	// delivered with a warning ([deliver.WarnMDNUnsigned]), as the RFCs
	// allow for an optional request. Optional. Default false. Requires
	// MDNCert.
	RequireSignedMDN bool
	// RequireMIC makes a "processed" MDN without Received-Content-MIC a
	// permanent failure ([ErrMICMissing]). Without it such an MDN is
	// delivered with a warning ([deliver.WarnMICMissing]) when a signed
	// MDN was asked for (MDNCert set), and accepted as is otherwise (no MIC
	// was asked for). Optional. Default false.
	RequireMIC bool
	// WarnOnMICMismatch delivers, with a warning ([deliver.WarnMICMismatch]),
	// a "processed" MDN whose Received-Content-MIC differs from the MIC
	// computed, or names an algorithm this package cannot compute. Optional.
	// Default false: a mismatch is a permanent failure ([ErrMICMismatch]),
	// so the message goes to the dead letters, never resent by itself, and
	// an operator looks: the receipt does not prove the partner received
	// our bytes (altered in transit, or a different canonicalisation), and
	// a warning would let that pass unnoticed. Set it for a partner known
	// to compute its MIC differently.
	WarnOnMICMismatch bool

	// The compatibility switches below adapt the wire format to what a
	// partner's product reads (see compat.go). Optional. Their zero values
	// follow the current RFCs.

	// Filename is sent on the payload part as Content-Disposition:
	// attachment; filename="..." (RFC 2183, RFC 6266), for receivers that
	// store files under it. Optional. Default "": no Content-Disposition.
	// It must be a safe name, one [SanitizeFilename] returns unchanged (no
	// path separators, control characters or '"'; at most 255 bytes);
	// non-ASCII names are sent as RFC 6266 §4.3 filename* with an ASCII
	// fallback. A message's [MetaFilename] overrides it ([Sender.SendMessage]).
	Filename string
	// LegacyMICAlg spells the micalg parameter of the signature's
	// Content-Type and the signed-receipt-micalg we ask for as RFC 3851 did
	// ("sha256", "sha1") rather than as RFC 5751 §3.4.3.2 does ("sha-256",
	// "sha-1"), for older peers that know only that spelling. Optional.
	// Default false. The MIC itself is the same either way.
	LegacyMICAlg bool
	// TransferBase64 sends the payload part inside a signature or an
	// encryption, and the application/pkcs7-mime part, with
	// Content-Transfer-Encoding: base64 (RFC 2045 §6.8) instead of binary,
	// for peers that cannot read binary MIME. Optional. Default false.
	// Ignored for an unsigned, unencrypted message (the payload is sent as
	// it is).
	TransferBase64 bool
	// KeyTransport is how the content key reaches the partner:
	// [KeyTransportPKCS1v15] (the default, rsaEncryption, which every AS2
	// product reads), [KeyTransportOAEPSHA256] or [KeyTransportOAEPSHA1]
	// (RSAES-OAEP, RFC 3560). Optional. Ignored without EncryptionCert.
	KeyTransport string
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
	if c.SignAlgorithm == "" {
		c.SignAlgorithm = DefaultSignAlgorithm
	}
	if c.EncryptAlgorithm == "" {
		c.EncryptAlgorithm = DefaultEncryptAlgorithm
	}
	if c.MDNMode == "" {
		c.MDNMode = MDNSync
	}
	if c.KeyTransport == "" {
		c.KeyTransport = DefaultKeyTransport
	}
	if c.AsyncMDNTimeout == 0 {
		c.AsyncMDNTimeout = DefaultAsyncMDNTimeout
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

// Validate reports whether c, with defaults applied to its zero fields, is
// valid: the check [NewSender] makes. It does not modify c. The error names
// the field and wraps the sentinel that states its allowed range: one of
// [ErrURL], [ErrAS2ID], [ErrContentType], [ErrHeaderValue],
// [ErrMessageIDDomain], [ErrNegative], [ErrCompression], [ErrMDNMode], [ErrAlgorithm], [ErrMissingKey],
// [ErrMissingCert], [ErrKeyMismatch], [ErrKeyType], [ErrCertExpired],
// [ErrCertNotYetValid] (as a [*TrustError], with [ErrCertNotPinned] and
// [ErrCertUntrusted], see trust.go), [ErrRollover] or [ErrFilename]. Certificates are
// checked against Config.Now (default: the current time).
func (c Config) Validate() error {
	c.setDefaults()
	return c.validateAt(c.now())
}

// validateAt requires defaults set; it checks certificates against now.
func (c Config) validateAt(now time.Time) error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("Config.URL %q: %w", redact.HTTPURL(c.URL), ErrURL)
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
	if err := c.validateCompression(); err != nil {
		return err
	}
	if err := c.validateMDN(); err != nil {
		return err
	}
	if err := c.validateCompat(); err != nil {
		return err
	}
	return c.validateSecurity(now)
}

// validateMDN checks MDNMode and the receipt policies that depend on it.
func (c Config) validateMDN() error {
	switch {
	case c.MDNMode != MDNSync && c.MDNMode != MDNNone && c.MDNMode != MDNAsync:
		return fmt.Errorf("Config.MDNMode %q: %w", c.MDNMode, ErrMDNMode)
	case c.MDNMode == MDNNone && (c.MDNCert != nil || c.RequireSignedMDN || c.RequireMIC):
		return fmt.Errorf("Config.MDNMode %q with MDNCert, RequireSignedMDN or RequireMIC: %w: no MDN is asked for", c.MDNMode, ErrMDNMode)
	case c.RequireSignedMDN && c.MDNCert == nil && c.TrustRoots == nil:
		return fmt.Errorf("Config.MDNCert: %w: RequireSignedMDN needs the certificate that signs the MDNs (or TrustRoots)", ErrMissingCert)
	}
	return c.validateAsync()
}

// validateSecurity checks the certificate, key and algorithm fields.
func (c Config) validateSecurity(now time.Time) error {
	if c.SignAlgorithm != "" {
		if _, err := lookupSignAlg(c.SignAlgorithm); err != nil {
			return fmt.Errorf("Config.SignAlgorithm: %w", err)
		}
	}
	if c.EncryptAlgorithm != "" {
		if _, err := lookupEncryptAlg(c.EncryptAlgorithm); err != nil {
			return fmt.Errorf("Config.EncryptAlgorithm: %w", err)
		}
	}
	switch {
	case c.SigningCert != nil && c.SigningKey == nil:
		return fmt.Errorf("Config.SigningKey: %w: SigningCert %s is set, its key is not", ErrMissingKey, certName(c.SigningCert))
	case c.SigningCert == nil && c.SigningKey != nil:
		return fmt.Errorf("Config.SigningCert: %w: SigningKey is set, its certificate is not", ErrMissingCert)
	case c.SigningCert != nil:
		if err := checkValidity(c.SigningCert, now); err != nil {
			return fmt.Errorf("Config.SigningCert: %w", err)
		}
		if err := checkSigningKey(c.SigningCert, c.SigningKey); err != nil {
			return fmt.Errorf("Config.SigningKey: %w", err)
		}
	}
	if c.EncryptionCert != nil && !c.rolledOver(now) {
		if err := checkValidity(c.EncryptionCert, now); err != nil {
			return fmt.Errorf("Config.EncryptionCert: %w", err)
		}
		if err := checkEncryptionCert(c.EncryptionCert); err != nil {
			return fmt.Errorf("Config.EncryptionCert: %w", err)
		}
	}
	if c.MDNCert != nil {
		if err := checkValidity(c.MDNCert, now); err != nil {
			return fmt.Errorf("Config.MDNCert: %w", err)
		}
	}
	return c.validateTrust(now)
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
