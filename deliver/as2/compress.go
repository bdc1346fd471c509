package as2

import (
	"bytes"
	"compress/zlib"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"io"
	"net/textproto"

	"github.com/smallstep/pkcs7"
)

// Compression orders, the values of [Config.Compression] (RFC 5402 §3,
// CMS compressed-data of RFC 3274 with zlib). Encryption, when
// Config.EncryptionCert is set, is always the outermost layer.
const (
	// CompressNone sends the payload uncompressed. The default.
	CompressNone = ""
	// CompressBeforeSign compresses the payload entity, then signs the
	// application/pkcs7-mime compressed-data entity (then encrypts):
	// compress-then-sign, the order pyas2lib uses. The MIC covers the
	// compressed entity, headers included: what was signed (RFC 5402 §4,
	// RFC 4130 §7.3.1).
	CompressBeforeSign = "compress-sign"
	// CompressAfterSign signs the payload entity, then compresses the
	// multipart/signed entity (then encrypts): sign-then-compress. The MIC
	// covers the payload entity, headers included: what was signed
	// (RFC 5402 §4, RFC 4130 §7.3.1).
	CompressAfterSign = "sign-compress"
)

// Without Config.SigningCert both orders mean the same: the payload entity
// is compressed (then encrypted), and the MIC covers the uncompressed
// payload entity with its MIME header fields (RFC 5402 §4: for an unsigned
// message, "the uncompressed data content including all MIME header
// fields").

// AS2Version is the AS2-Version header value of the messages a [Sender]
// sends and of as2partner's MDNs: "1.2". Version 1.1 announces support for
// compressed-data (RFC 5402 §3), which both sides now have: a Sender
// compresses (Config.Compression) and [OpenMessage] decompresses at any
// layer. Version 1.2 adds the EDIINT-Features header (RFC 6017); sending
// none announces no optional feature.
const AS2Version = "1.2"

// DefaultMaxDecompressedSize is the default bound of
// OpenOptions.MaxDecompressedSize: 64 MiB.
const DefaultMaxDecompressedSize = 64 << 20

// Object identifiers of RFC 3274: the compressed-data content type and
// the zlib compression algorithm.
var (
	oidCompressedData = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 16, 1, 9}
	oidZlib           = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 16, 3, 8}
)

// The CMS CompressedData structure (RFC 3274 §1.1).
type (
	cmsCompressedData struct {
		Version              int // always 0
		CompressionAlgorithm pkix.AlgorithmIdentifier
		EncapContentInfo     cmsEncapContentInfo
	}
	cmsEncapContentInfo struct {
		EContentType asn1.ObjectIdentifier
		EContent     []byte `asn1:"explicit,optional,tag:0"`
	}
)

// validateCompression checks Config.Compression.
func (c Config) validateCompression() error {
	switch c.Compression {
	case CompressNone, CompressBeforeSign, CompressAfterSign:
		return nil
	}
	return fmt.Errorf("Config.Compression %q: %w", c.Compression, ErrCompression)
}

// compressStep returns the body step that compresses the entity.
func compressStep() bodyStep {
	return func(e entity) (entity, error) { return compressEntity(e.canonical()) }
}

// compressEntity returns the application/pkcs7-mime compressed-data entity
// (RFC 3274 §2, RFC 5402 §3) whose content is the canonical entity content.
func compressEntity(content []byte) (entity, error) {
	der, err := Compress(content)
	if err != nil {
		return entity{}, err
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Type", `application/pkcs7-mime; smime-type=compressed-data; name="smime.p7z"`)
	h.Set("Content-Transfer-Encoding", "binary")
	h.Set("Content-Disposition", `attachment; filename="smime.p7z"`)
	return entity{Header: h, Body: der}, nil
}

// Compress returns content as a DER CMS ContentInfo of type
// compressed-data (RFC 3274 §1.1), zlib-compressed (RFC 1950), with
// eContentType id-data: the body of an application/pkcs7-mime;
// smime-type=compressed-data entity. Compress is safe for concurrent use.
func Compress(content []byte) ([]byte, error) {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	if _, err := w.Write(content); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	inner, err := asn1.Marshal(cmsCompressedData{
		CompressionAlgorithm: pkix.AlgorithmIdentifier{Algorithm: oidZlib},
		EncapContentInfo:     cmsEncapContentInfo{EContentType: pkcs7.OIDData, EContent: z.Bytes()},
	})
	if err != nil {
		return nil, fmt.Errorf("as2: compressing: %w", err)
	}
	return asn1.Marshal(cmsContentInfo{
		ContentType: oidCompressedData,
		Content:     asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: inner},
	})
}

// Decompress opens a CMS compressed-data ContentInfo (RFC 3274; DER or
// BER with indefinite lengths, raw or base64 as S/MIME tools write it) compressed with zlib, and
// returns its content, normally a MIME entity. It reads at most max bytes
// of decompressed content (max <= 0 means [DefaultMaxDecompressedSize]), so
// a zlib bomb costs at most max bytes of memory. The error wraps
// [ErrDecompression], and also [ErrTooLarge] when the content exceeds max.
// Decompress is safe for concurrent use.
func Decompress(body []byte, max int64) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxDecompressedSize
	}
	der, err := derOrBase64(body)
	if err != nil {
		return nil, fmt.Errorf("%w: body is neither DER nor base64 DER", ErrDecompression)
	}
	var ci cmsContentInfo
	if _, err := asn1.Unmarshal(der, &ci); err != nil {
		// BER, as streaming CMS producers write it.
		if der, err = berToDER(der); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrDecompression, err)
		}
		if _, err := asn1.Unmarshal(der, &ci); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrDecompression, err)
		}
	}
	if !ci.ContentType.Equal(oidCompressedData) {
		return nil, fmt.Errorf("%w: content type %v is not compressed-data", ErrDecompression, ci.ContentType)
	}
	var cd cmsCompressedData
	if _, err := asn1.Unmarshal(ci.Content.Bytes, &cd); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecompression, err)
	}
	if !cd.CompressionAlgorithm.Algorithm.Equal(oidZlib) {
		return nil, fmt.Errorf("%w: compression algorithm %v is not zlib", ErrDecompression, cd.CompressionAlgorithm.Algorithm)
	}
	if cd.EncapContentInfo.EContent == nil {
		return nil, fmt.Errorf("%w: no content", ErrDecompression)
	}
	r, err := zlib.NewReader(bytes.NewReader(cd.EncapContentInfo.EContent))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecompression, err)
	}
	defer r.Close()
	out, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecompression, err)
	}
	if int64(len(out)) > max {
		return nil, fmt.Errorf("%w: %w: more than %d bytes decompressed", ErrDecompression, ErrTooLarge, max)
	}
	return out, nil
}

// isCompressedData reports whether a CMS body (DER or base64) is a
// compressed-data ContentInfo, for an application/pkcs7-mime entity
// without smime-type.
func isCompressedData(body []byte) bool {
	der, err := derOrBase64(body)
	if err != nil {
		return false
	}
	var ci cmsContentInfo
	if _, err = asn1.Unmarshal(der, &ci); err != nil {
		if der, err = berToDER(der); err == nil {
			_, err = asn1.Unmarshal(der, &ci)
		}
	}
	return err == nil && ci.ContentType.Equal(oidCompressedData)
}
