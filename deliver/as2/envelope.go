package as2

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"mime"
	"net/textproto"
	"strings"

	"github.com/smallstep/pkcs7"
)

// maxLayers bounds the S/MIME layers OpenMessage opens, so a message
// nesting compressed-data in itself cannot loop long.
const maxLayers = 8

// bareContentType is the media type of a payload that arrived without MIME
// header fields inside an envelope, signature or compression.
const bareContentType = "application/octet-stream"

// openMessage opens the layers of a message from the outside in:
//
//   - application/pkcs7-mime with smime-type=compressed-data (or, without
//     smime-type, a CMS compressed-data body): decompressed (RFC 3274,
//     RFC 5402), bounded by opts.MaxDecompressedSize for all such layers
//     together;
//   - application/pkcs7-mime with smime-type=signed-data: verified, the
//     content taken from inside the signature (RFC 5751 §3.4.2, opaque
//     signing);
//   - other application/pkcs7-mime: decrypted (enveloped-data, RFC 5751
//     §3.3);
//   - multipart/signed: verified (RFC 5751 §3.5.3).
//
// Each opened layer holds a MIME entity, or the bare payload (see
// [parseInner]). The MIC (RFC 4130 §7.3.1, RFC 5402 §4) covers what the
// outermost signature signed; without a signature, the innermost opened
// entity (decrypted, decompressed, headers included); without any layer,
// the body alone.
func openMessage(contentType string, body []byte, opts OpenOptions) (*Opened, error) {
	micAlg := MICAlgSHA256
	if opts.MICAlgorithm != "" {
		if a, err := lookupSignAlg(opts.MICAlgorithm); err == nil {
			micAlg = a.micalg
		}
	}
	// The bound holds for all compressed layers together: nesting must
	// not multiply it by the layer count.
	limit := opts.MaxDecompressedSize
	if limit <= 0 {
		limit = DefaultMaxDecompressedSize
	}
	budget := limit
	o := &Opened{ContentType: contentType}
	micContent := body
	cte := ""
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, fmt.Errorf("%w: Content-Type %q: %v", ErrMalformedMIME, contentType, err)
	}
	for layer := 0; ; layer++ {
		var inner []byte
		switch mediaType {
		case mediaPKCS7MIME, "application/x-pkcs7-mime", mediaSigned:
			// Refused before opening it: layers 0..maxLayers-1 are opened.
			if layer >= maxLayers {
				return nil, fmt.Errorf("%w: more than %d S/MIME layers", ErrMalformedMIME, maxLayers)
			}
		}
		switch mediaType {
		case mediaPKCS7MIME, "application/x-pkcs7-mime":
			smimeType := strings.ToLower(params["smime-type"])
			switch {
			case smimeType == "compressed-data" || (smimeType == "" && isCompressedData(body)):
				if budget <= 0 {
					err = fmt.Errorf("%w: %w: more than %d bytes decompressed in all layers", ErrDecompression, ErrTooLarge, limit)
					break
				}
				if inner, err = Decompress(body, budget); errors.Is(err, ErrTooLarge) && budget < limit {
					err = fmt.Errorf("%w: %w: more than %d bytes decompressed in all layers", ErrDecompression, ErrTooLarge, limit)
				}
				budget -= int64(len(inner))
				o.Compressed = true
			case smimeType == "signed-data":
				var signer *x509.Certificate
				var digest string
				if inner, signer, digest, err = verifyOpaque(body, opts.SignerCert); err == nil && !o.Signed {
					o.Signed, o.Signer, micContent = true, signer, inner
					if opts.MICAlgorithm == "" && digest != "" {
						// RFC 4130 §7.3.1: the MIC of a signed message is
						// in the digest it was signed with.
						micAlg = digest
					}
				}
			default:
				inner, err = Decrypt(body, opts.Cert, opts.Key)
				o.Encrypted = true
			}
			if err != nil {
				return nil, err
			}
			if !o.Signed {
				micContent = inner
			}
		case mediaSigned:
			var signer *x509.Certificate
			inner, signer, err = VerifySigned(o.ContentType, body, opts.SignerCert)
			if err != nil {
				return nil, err
			}
			if !o.Signed {
				o.Signed, o.Signer, micContent = true, signer, inner
				if opts.MICAlgorithm == "" {
					// RFC 4130 §7.3.1: the MIC of a signed message is in
					// the digest it was signed with (its micalg parameter).
					if a, err := lookupSignAlg(params["micalg"]); err == nil {
						micAlg = a.micalg
					}
				}
			}
		default:
			if o.Payload, err = decodeBody(cte, body); err != nil {
				return nil, err
			}
			if o.MIC, err = ComputeMIC(micAlg, micContent); err != nil {
				return nil, err
			}
			return o, nil
		}
		h, b, err := parseInner(inner)
		if err != nil {
			return nil, err
		}
		o.Header, o.Bare, body = h, h == nil, b
		if h == nil {
			o.ContentType, cte = bareContentType, ""
			mediaType, params = bareContentType, nil
			continue
		}
		o.ContentType, cte = h.Get("Content-Type"), h.Get("Content-Transfer-Encoding")
		if o.ContentType == "" {
			o.ContentType = bareContentType
		}
		if mediaType, params, err = mime.ParseMediaType(o.ContentType); err != nil {
			return nil, fmt.Errorf("%w: inner Content-Type %q: %v", ErrMalformedMIME, o.ContentType, err)
		}
	}
}

// parseInner splits the content of an envelope, signature or compression
// into a MIME entity's header and body. Some implementations put the bare
// payload there, with no MIME header fields: content that does not start
// with a header (fields up to an empty line, one of them a Content-* or
// MIME-Version field) nor with an empty line is taken as a bare payload,
// and parseInner returns a nil header and the content whole.
func parseInner(content []byte) (textproto.MIMEHeader, []byte, error) {
	if bytes.HasPrefix(content, []byte("\r\n")) || bytes.HasPrefix(content, []byte("\n")) {
		return parseEntity(content)
	}
	h, b, err := parseEntity(content)
	if err != nil {
		return nil, content, nil
	}
	for k := range h {
		if strings.HasPrefix(k, "Content-") || k == "Mime-Version" {
			return h, b, nil
		}
	}
	return nil, content, nil
}

// verifyOpaque verifies an opaque CMS SignedData (the body of an
// application/pkcs7-mime; smime-type=signed-data entity, DER, BER or
// base64) and returns the content it encapsulates and the signer, pinned to
// cert when cert is non-nil, and the micalg of the first signer's digest
// algorithm ("" when it is not one of signAlgs). The error wraps
// [ErrSignature].
func verifyOpaque(body []byte, cert *x509.Certificate) (content []byte, signer *x509.Certificate, micalg string, err error) {
	der, err := derOrBase64(body)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w: body is neither DER nor base64 DER", ErrSignature)
	}
	p7, err := pkcs7.Parse(der)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w: %v", ErrSignature, err)
	}
	if len(p7.Content) == 0 {
		return nil, nil, "", fmt.Errorf("%w: signed-data without content (detached)", ErrSignature)
	}
	if signer, err = verifyDetached(p7.Content, der, cert); err != nil {
		return nil, nil, "", err
	}
	if len(p7.Signers) > 0 {
		for _, a := range signAlgs {
			if a.oid.Equal(p7.Signers[0].DigestAlgorithm.Algorithm) {
				micalg = a.micalg
				break
			}
		}
	}
	return p7.Content, signer, micalg, nil
}
