package as2

import (
	"crypto/x509/pkix"
	"encoding/asn1"

	"github.com/smallstep/pkcs7"
)

// CompressedDataForTest wraps zlib bytes made by a test in a CMS
// compressed-data ContentInfo, for streams Compress would not write (a
// zlib bomb).
func CompressedDataForTest(z []byte) ([]byte, error) {
	inner, err := asn1.Marshal(cmsCompressedData{
		CompressionAlgorithm: pkix.AlgorithmIdentifier{Algorithm: oidZlib},
		EncapContentInfo:     cmsEncapContentInfo{EContentType: pkcs7.OIDData, EContent: z},
	})
	if err != nil {
		return nil, err
	}
	return asn1.Marshal(cmsContentInfo{
		ContentType: oidCompressedData,
		Content:     asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: inner},
	})
}
