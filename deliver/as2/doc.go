// Package as2 sends business documents to a trading partner over AS2
// (Applicability Statement 2, RFC 4130): one HTTP POST per message, answered
// by a synchronous MDN (Message Disposition Notification, RFC 3798) that says
// whether the partner processed it.
//
// # Model
//
// A [Sender] is configured once per partner with a [Config] (URL, AS2 IDs,
// timeouts) and is safe for concurrent use. [Sender.Send] sends one message
// and returns the partner's [MDN], or a [*deliver.Error] classified for the
// floodgate middleware:
//
//   - success: HTTP 2xx carrying an MDN for this Message-ID whose disposition
//     is "processed" (or "processed/warning"), and whose Received-Content-MIC,
//     when present, matches the MIC computed here.
//   - retryable ([deliver.ErrRetryable]): timeout, connection error, HTTP 5xx,
//     429 or 408, or a 2xx without a parseable MDN. Sending again is safe: the
//     Message-ID is derived from the message UUID ([MessageID]), so the partner
//     can recognise a duplicate.
//   - permanent ([deliver.ErrPermanent]): other HTTP 4xx (and 3xx: redirects
//     are not followed), an MDN with a "processed/error" or "failed"
//     disposition, an MDN answering another Message-ID, a MIC mismatch, or a
//     message that cannot be built (bad id, empty payload).
//
// # Building a message
//
// [Sender.Build] turns a payload into an [Outbound]: the payload becomes a
// MIME entity of the configured Content-Type (application/EDI-X12 by
// default), its MIC is computed (RFC 4130 §7.3.1), and the entity is passed
// through the sender's body steps before it becomes the HTTP body. This
// version sends unsigned and unencrypted, so there are no steps and the MIC
// is the SHA-256 of the payload alone. Signing (multipart/signed) and
// encryption (application/pkcs7-mime) are body steps that wrap the entity;
// with them the MIC covers the payload entity's MIME headers and content, and
// a signed MDN is verified before [ParseMDN] reads it.
//
// No Disposition-Notification-Options header is sent, which asks for an
// unsigned MDN (RFC 4130 §7.3). Partners that sign their MDN anyway are
// understood: [ParseMDN] reads the report inside multipart/signed, without
// verifying the signature ([MDN.Signed] is set).
//
// Package as2partner holds an in-process AS2 receiver with a fault script,
// used by the examples and tests.
package as2
