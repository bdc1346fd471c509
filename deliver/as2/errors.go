package as2

import "errors"

// Configuration errors, returned (wrapped, naming the field) by
// [Config.Validate] and [NewSender].
var (
	// ErrURL: Config.URL is not an absolute http or https URL.
	ErrURL = errors.New("as2: URL must be an absolute http:// or https:// URL")
	// ErrAS2ID: an AS2 ID is not 1 to 128 printable ASCII characters
	// (RFC 4130 §6.2).
	ErrAS2ID = errors.New("as2: AS2 ID must be 1 to 128 printable ASCII characters (RFC 4130 §6.2)")
	// ErrContentType: Config.ContentType is not a valid media type (RFC 2045 §5.1).
	ErrContentType = errors.New("as2: content type must be a valid media type")
	// ErrHeaderValue: Config.Subject or Config.MDNTo contains a control
	// character, or MDNTo is not printable ASCII.
	ErrHeaderValue = errors.New("as2: header value must not contain control characters")
	// ErrMessageIDDomain: Config.MessageIDDomain is not a dot-atom (RFC 5322 §3.6.4).
	ErrMessageIDDomain = errors.New("as2: message ID domain must be a dot-atom such as example.com (RFC 5322 §3.6.4)")
	// ErrMDNMode: Config.MDNMode is not "sync", "none" or "async", or is
	// "none" with a setting that asks for an MDN, or "async" without
	// Config.Receipts, or another mode with the async fields set.
	ErrMDNMode = errors.New(`as2: MDN mode must be "sync", "none" or "async"`)
	// ErrNegative: a duration or size in Config is negative.
	ErrNegative = errors.New("as2: must not be negative")
	// ErrUnsignedAsyncMDN: [MDNAsync] with neither MDNCert nor TrustRoots,
	// and AllowUnsignedAsyncMDN not set (see there).
	ErrUnsignedAsyncMDN = errors.New("as2: asynchronous MDNs need MDNCert or TrustRoots, or AllowUnsignedAsyncMDN")
	// ErrAlgorithm: Config.SignAlgorithm or Config.EncryptAlgorithm names an
	// algorithm this package does not implement.
	ErrAlgorithm = errors.New("as2: unknown algorithm")
	// ErrCertExpired: a certificate's NotAfter is in the past.
	ErrCertExpired = errors.New("as2: certificate has expired")
	// ErrCertNotYetValid: a certificate's NotBefore is in the future.
	ErrCertNotYetValid = errors.New("as2: certificate is not yet valid")
	// ErrMissingKey: Config.SigningCert is set without Config.SigningKey.
	ErrMissingKey = errors.New("as2: certificate has no private key")
	// ErrMissingCert: a key is set without its certificate, or a
	// certificate another setting needs is missing.
	ErrMissingCert = errors.New("as2: certificate missing")
	// ErrKeyMismatch: Config.SigningKey is not the private key of
	// Config.SigningCert.
	ErrKeyMismatch = errors.New("as2: private key does not match certificate")
	// ErrKeyType: a key cannot be used: signing needs an RSA or ECDSA key,
	// encryption (RSA key transport) an RSA certificate.
	ErrKeyType = errors.New("as2: unsupported key type")
	// ErrCertNotPinned: in the pinned model (Config.TrustRoots nil) an MDN
	// is signed by a certificate other than Config.MDNCert and
	// Config.NextMDNCert (the signature itself verifies with the
	// certificate it carries). Returned inside a [*TrustError].
	ErrCertNotPinned = errors.New("as2: certificate is not the pinned one")
	// ErrCertUntrusted: in the CA model a certificate (configured, or an
	// MDN's signer) does not chain to Config.TrustRoots. Returned inside a
	// [*TrustError].
	ErrCertUntrusted = errors.New("as2: certificate does not chain to the trusted CA")
	// ErrRollover: Config.NextEncryptionCert or Config.NextMDNCert is set
	// without what it replaces (EncryptionCert, MDNCert), or
	// NextEncryptionFrom is zero or outside NextEncryptionCert's validity.
	ErrRollover = errors.New("as2: certificate rollover needs the current certificate and a switch date within the next one's validity")
	// ErrPEM: a PEM file cannot be read or holds no usable block.
	ErrPEM = errors.New("as2: bad PEM file")
)

// Errors building a message. [Sender.Send] wraps them in a permanent
// [*deliver.Error].
var (
	// ErrMessageID: the id passed to Send or Build cannot be the left part of
	// a Message-ID (it must be a dot-atom: letters, digits, "-", "." and
	// RFC 5322 atext).
	ErrMessageID = errors.New("as2: id must be a non-empty dot-atom (RFC 5322 §3.6.4)")
	// ErrEmptyPayload: the payload is empty.
	ErrEmptyPayload = errors.New("as2: empty payload")
)

// Errors reading an MDN, returned by [ParseMDN]. [Sender.Send] wraps them in
// a [*deliver.Warning] ([deliver.WarnUnconfirmed]): the partner answered
// 2xx, so it has the message, but gave no usable receipt.
var (
	// ErrNoMDN: the response is not a multipart/report of report-type
	// disposition-notification (RFC 3798 §3, RFC 4130 §7.4).
	ErrNoMDN = errors.New("as2: response is not an MDN")
	// ErrMalformedMDN: the response claims to be an MDN but cannot be read.
	ErrMalformedMDN = errors.New("as2: malformed MDN")
)

// Errors verifying an MDN against the message sent. [Sender.Send] wraps them
// in a permanent [*deliver.Error], or, as the receipt policies of [Config]
// say, in a [*deliver.Warning].
var (
	// ErrNotProcessed: the MDN disposition is not "processed" (for example
	// "processed/error: authentication-failed" or "failed/failure: ...").
	ErrNotProcessed = errors.New("as2: MDN disposition is not processed")
	// ErrMDNMismatch: the MDN's Original-Message-ID is not the Message-ID sent.
	ErrMDNMismatch = errors.New("as2: MDN answers another message")
	// ErrMICMismatch: the MDN's Received-Content-MIC differs from the MIC
	// computed for the message sent (RFC 4130 §7.3.1).
	ErrMICMismatch = errors.New("as2: received content MIC does not match")
	// ErrMICAlgorithm: a MIC names an algorithm this package cannot compute.
	ErrMICAlgorithm = errors.New("as2: unsupported MIC algorithm")
	// ErrMICMissing: a signed receipt was requested but the MDN carries no
	// Received-Content-MIC, so it proves nothing about the content
	// (RFC 4130 §7.4.3: the field is required in a signed receipt). A
	// permanent failure with Config.RequireMIC, else a warning.
	ErrMICMissing = errors.New("as2: MDN has no received content MIC")
	// ErrMDNSignature: the signature of a signed MDN does not verify with
	// the partner's MDN certificate (Config.MDNCert): the MDN was altered,
	// or signed by another key.
	ErrMDNSignature = errors.New("as2: MDN signature does not verify")
	// ErrMDNUnsigned: a signed MDN was requested (Config.MDNCert is set) but
	// the partner returned an unsigned one. A permanent failure when the
	// request said "required" (Config.RequireSignedMDN) or the MDN reports
	// a failure; a warning for a "processed" MDN to an optional request
	// (RFC 3798 §2.2, RFC 4130 §7.3).
	ErrMDNUnsigned = errors.New("as2: MDN is not signed")
)

// Errors opening a signed or encrypted message ([OpenMessage], and the
// detached signature checks of [VerifySigned]).
var (
	// ErrDecryption: an application/pkcs7-mime body cannot be decrypted
	// with the configured key (wrong recipient, unsupported algorithm,
	// corrupted data), RFC 4130 §7.4.3 "decryption-failed".
	ErrDecryption = errors.New("as2: cannot decrypt")
	// ErrSignature: a multipart/signed entity's signature does not verify,
	// or is not by the expected certificate; RFC 4130 §7.4.3
	// "authentication-failed" or "integrity-check-failed".
	ErrSignature = errors.New("as2: signature does not verify")
	// ErrMalformedMIME: a MIME entity cannot be read.
	ErrMalformedMIME = errors.New("as2: malformed MIME entity")
)

// Errors of the compatibility switches and of the receipt's disposition.
var (
	// ErrFilename: Config.Filename is not a safe file name: [SanitizeFilename]
	// would change it (a path separator, a control character, '"', leading
	// or trailing spaces or dots, or more than 255 bytes).
	ErrFilename = errors.New("as2: filename must be a bare file name: no path separators, control characters or quotes, 1 to 255 bytes")
	// ErrECDSASigningKey is a warning, never a failure: Config.SigningKey
	// is an ECDSA key, and many AS2 peers (pyas2lib among them) verify RSA
	// signatures only. [Sender.Warnings] returns it.
	ErrECDSASigningKey = errors.New("as2: ECDSA signing key: many AS2 peers verify RSA signatures only")
	// ErrMDNWarning: the MDN says "processed/warning: ..." (RFC 4130
	// §7.4.3): the partner processed the message but reports a problem.
	// [Sender.Send] wraps it in a [*deliver.Warning]
	// ([deliver.WarnMDNWarning]).
	ErrMDNWarning = errors.New("as2: MDN disposition is processed with a warning")
)

// Errors of compression (RFC 5402, RFC 3274).
var (
	// ErrCompression: Config.Compression is not [CompressNone],
	// [CompressBeforeSign] or [CompressAfterSign].
	ErrCompression = errors.New(`as2: compression must be "", "compress-sign" or "sign-compress"`)
	// ErrDecompression: an application/pkcs7-mime compressed-data body
	// cannot be decompressed (not CMS compressed-data, not zlib, corrupted,
	// or too large), RFC 5402 §5 "decompression-failed".
	ErrDecompression = errors.New("as2: cannot decompress")
	// ErrTooLarge: decompressed content exceeds its bound
	// (OpenOptions.MaxDecompressedSize): a zlib bomb, or a limit set too
	// low. It comes wrapped with [ErrDecompression].
	ErrTooLarge = errors.New("as2: decompressed content too large")
)
