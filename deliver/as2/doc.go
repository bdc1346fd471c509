// Package as2 sends business documents to a trading partner over AS2
// (Applicability Statement 2, RFC 4130): one HTTP POST per message, answered
// by a synchronous MDN (Message Disposition Notification, RFC 3798) that says
// whether the partner processed it.
//
// # Model
//
// A [Sender] is configured once per partner with a [Config] (URL, AS2 IDs,
// timeouts) and is safe for concurrent use. [Sender.Send] sends one message
// and returns the partner's [MDN], a [*deliver.Warning] or a
// [*deliver.Error] classified for the floodgate middleware:
//
//   - success: HTTP 2xx carrying an MDN for this Message-ID whose disposition
//     is "processed" (or "processed/warning"), and whose Received-Content-MIC,
//     when present, matches the MIC computed here; under [MDNNone], any 2xx.
//   - delivered with a warning ([deliver.ErrWarning]): the partner took the
//     message but its receipt is imperfect (see Receipts). The middleware
//     acks it; it is never resent, since a resend is a duplicate order.
//   - retryable ([deliver.ErrRetryable]): timeout, connection error, HTTP 5xx,
//     429 or 408. Sending again is safe: the
//     Message-ID is derived from the message UUID ([MessageID]), so the partner
//     can recognise a duplicate.
//   - permanent ([deliver.ErrPermanent]): other HTTP 4xx (and 3xx: redirects
//     are not followed), an MDN with a "processed/error" or "failed"
//     disposition, an MDN answering another Message-ID, a MIC mismatch
//     (unless Config.WarnOnMICMismatch), a signed MDN whose signature does
//     not verify, an unsigned MDN when a signed one was required, a missing
//     MIC when required, or a message that cannot be built (bad id, empty
//     payload).
//
// # Building a message
//
// [Sender.Build] turns a payload into an [Outbound]: the payload becomes a
// MIME entity of the configured Content-Type (application/EDI-X12 by
// default), which is signed, then encrypted, as the [Config] says:
//
//   - signed (Config.SigningCert and SigningKey): a multipart/signed entity
//     (RFC 5751 §3.5.3) whose first part is the payload entity, sent
//     binary, and whose second is a detached CMS SignedData
//     (github.com/smallstep/pkcs7) in Config.SignAlgorithm (SHA-256 by
//     default; SHA-384, SHA-512, and SHA-1 for old partners);
//   - encrypted (Config.EncryptionCert): an application/pkcs7-mime
//     enveloped-data entity (RFC 5751 §3.3) in AES-256-CBC (default),
//     AES-128-CBC or 3DES, the content key sent with RSA PKCS #1 v1.5, or
//     RSA-OAEP (Config.KeyTransport);
//   - compressed (Config.Compression, RFC 5402): an application/pkcs7-mime
//     compressed-data entity (RFC 3274, zlib), before signing
//     ([CompressBeforeSign]) or after it ([CompressAfterSign]), always
//     inside the encryption;
//   - the outermost entity's header fields become HTTP headers and its body
//     the HTTP body, in binary (RFC 4130 §5.2).
//
// Per-partner compatibility switches adapt this to a partner's product:
// Config.Filename (and [MetaFilename] per message) names the payload,
// Config.LegacyMICAlg spells micalg "sha256", Config.TransferBase64 sends
// base64 instead of binary, and [Sender.Warnings] reports an ECDSA
// signing key many peers refuse.
//
// The MIC of RFC 4130 §7.3.1 is computed in the signing digest: over the
// payload alone for a plain message; over the canonical payload entity
// (header lines ending in CRLF, an empty line, the content unchanged) for a
// signed or encrypted one: exactly the bytes the signature covers. With
// compression (RFC 5402 §4) a signed message's MIC still covers what was
// signed (the compressed entity under [CompressBeforeSign]), an unsigned
// one's the uncompressed payload entity, headers included.
//
// [OpenMessage] opens what other products send: enveloped-data,
// compressed-data (at most OpenOptions.MaxDecompressedSize bytes) and
// multipart/signed layers in any order, and bare payloads (no MIME header
// fields) inside them.
//
// # Receipts
//
// Config.MDNMode says whether an MDN is asked for: [MDNSync] (default)
// asks for a synchronous one, [MDNNone] for none (a 2xx is the delivery),
// [MDNAsync] for one posted later to Config.AsyncMDNURL
// (Receipt-Delivery-Option): a 2xx is the delivery once its
// [PendingReceipt] is stored in Config.Receipts, and the MDN is judged
// later, by any replica, with [Sender.ResolveReceipt] (package asyncmdn).
//
// Without Config.MDNCert the sender asks for an unsigned MDN (no
// Disposition-Notification-Options header); partners that sign anyway are
// understood, without verification ([MDN.Signed] set, [MDN.Verified] not).
// With it, every request asks for a signed MDN with a MIC in our digest,
// as "optional", or "required" with Config.RequireSignedMDN (RFC 4130
// §7.3, RFC 3798 §2.2), and [Sender.VerifyMDNAt] checks the signature and
// its signer against the trust model (below). Every answer has one
// outcome, per partner:
//
//	answer (HTTP 2xx)                             outcome
//	no MDN, or an unreadable one (MDNSync)        warning "unconfirmed"
//	any body (MDNNone)                            delivered
//	"processed", unsigned, signed one optional    warning "mdn-unsigned"
//	"processed", unsigned, signed one required    permanent, ErrMDNUnsigned
//	signature does not verify                     permanent, ErrMDNSignature
//	signer not trusted (see Trust)                parked, retryable, *TrustError in a deliver.ParkError
//	"processed", no MIC, signed MDN asked for     warning "mic-missing" (permanent with RequireMIC)
//	"processed", MIC differs                      permanent, ErrMICMismatch (warning "mic-mismatch" with WarnOnMICMismatch)
//	not "processed", or another Message-ID        permanent
//
// A MIC mismatch is permanent by default: the receipt does not prove the
// partner received our bytes, so the message goes to the dead letters for
// an operator to look at, never resent by itself; downgrade it for a
// partner known to compute its MIC differently.
//
// # Trust
//
// Config.TrustRoots chooses the trust model of the partner's certificates:
// nil is the pinned model (an MDN must be signed by exactly Config.MDNCert
// or, during a rollover, Config.NextMDNCert; often self-signed), a pool
// the CA model (every configured partner certificate, and any MDN signer,
// must chain to it). Certificates are used only within their validity
// period by Config.Now, checked at load and at every MDN. Failures are
// [*TrustError] values wrapping [ErrCertExpired], [ErrCertNotYetValid],
// [ErrCertNotPinned] or [ErrCertUntrusted]. [Sender.Send] returns an
// untrusted MDN signer as a [deliver.ParkError]: the floodgate middleware
// then parks the partner (its breaker forced open with the reason, the
// messages kept in the retry stream) until an operator fixes the profile
// and runs "floodgate close". Config.NextEncryptionCert replaces
// Config.EncryptionCert at Config.NextEncryptionFrom.
//
// # Profiles and the receiving side
//
// [LoadProfile] reads the certificates and key of a Config from PEM files;
// [NewSender] validates them (expired or not yet valid certificates, a key
// that is not the certificate's, a missing key, an unknown algorithm), each
// error naming the field. [OpenMessage], [VerifySigned], [Decrypt],
// [SignEntity] and [EncryptEntity] are the building blocks of the receiving
// side, used by the partner simulator and by tests against OpenSSL.
//
// OpenSSL 3's S/MIME reader rewrites bare LF line ends inside
// multipart/signed into CRLF even with -binary, so a payload with bare LF
// (common in X12 files) verifies in "openssl cms -verify" only as detached
// content; AS2 receivers that treat the HTTP body as binary verify it as
// sent. [VerifySigned] accepts both the exact and the CRLF-canonical form.
//
// Package as2partner holds an in-process AS2 receiver with a fault script,
// used by the examples and tests.
package as2
