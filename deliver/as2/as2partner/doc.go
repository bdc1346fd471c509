// Package as2partner is an in-process AS2 trading partner (the receiving
// side of RFC 4130) for examples and tests: an [http.Handler] that reads real
// AS2 requests, answers with real synchronous MDNs (multipart/report,
// RFC 3798), records every Message-ID it processed, and misbehaves on cue.
//
// # Fault script
//
// A [Partner] follows a script of [Phase]s, each lasting a Duration from the
// script's start (t=0, set by [Partner.Start] or by the first request):
//
//   - [Healthy]: every valid request is processed after the phase's Latency.
//   - [Down]: every request is answered HTTP 503 with no MDN, as a partner
//     whose AS2 server is offline behind a load balancer.
//   - [Fragile]: the partner has a capacity of Capacity messages per second
//     (a token bucket with a small burst, golang.org/x/time/rate). Requests
//     within capacity are processed; the excess gets HTTP 503 ([Reject503]) or
//     waits SlowLatency and is then processed ([Slow]).
//
// The last phase, or one with Duration 0, lasts forever.
//
// A phase with MinRequests lasts also until it has received that many
// requests: it ends at the later of its start + Duration and the arrival of
// its MinRequests-th request, and the later phases shift by as much. Time
// alone cannot promise a caller a number of calls in an outage (a loaded
// machine makes fewer); a count can. [Partner.PhaseChanges] tells when each
// phase actually began.
//
// # Records
//
// A message counts as received only when a "processed" MDN is returned for
// it. [Partner.Received] maps each Message-ID to the number of times it was
// processed, so duplicates (at-least-once redelivery) are visible;
// [Partner.ControlNumbers] does the same for X12 interchange control numbers
// (ISA13) of the payloads; [Partner.Stats] counts requests by outcome.
//
// # Validation
//
// Requests without AS2-From, AS2-To or Message-ID, or not POST, get HTTP
// 400 (405); a request for another AS2 ID than Config.AS2ID gets an MDN with
// disposition "processed/error: authentication-failed". A request without
// Disposition-Notification-To is processed and answered 200 with no MDN
// (RFC 4130 §7.3: no MDN was asked for).
//
// Config.NoMDN, UnsignedMDN, OmitMIC and WrongMIC make the receipt of a
// processed request imperfect, as some real partners' receipts are: no MDN
// at all, an unsigned MDN to a request for a signed one, no
// Received-Content-MIC, or a MIC that does not match.
//
// A request with Receipt-Delivery-Option asks for an asynchronous MDN
// (RFC 4130 §7.3): with Config.Async allowing its URL, the partner
// answers 200 with no body and posts the same MDN there later
// ([AsyncConfig.Delay], or when [Partner.PostReceipts] is called with
// [AsyncConfig.Hold]). The URL comes from the request, so only URLs
// matching [AsyncConfig.AllowURLs] are used (default none: HTTP 403, the
// message not processed), redirects are not followed, and each post is
// bounded in time and in the answer read.
//
// # Security
//
// The partner speaks the signed and encrypted AS2 of [as2.Sender], through
// [as2.OpenMessage]: with Config.Cert and Config.Key it decrypts
// application/pkcs7-mime requests, decompresses compressed-data ones at any
// layer (RFC 5402, at most Config.MaxDecompressedSize bytes), accepts bare
// payloads without MIME header fields inside an envelope or signature,
// verifies multipart/signed ones (against Config.SenderCert when set),
// computes the MIC of RFC 4130 §7.3.1 in the
// algorithm the request asked for, and signs its MDN when the request asked
// for a signed receipt. Failures are answered as a real partner does, with
// an MDN: "processed/error: decryption-failed", "decompression-failed"
// (RFC 5402 §5), "authentication-failed"
// (signature), "insufficient-message-security" (Config.RequireSigned,
// Config.RequireEncrypted) or "unexpected-processing-error" (unreadable
// MIME). [github.com/floodgate-go/floodgate/deliver/as2/as2test] makes
// matching key material for a sender and a partner.
package as2partner
