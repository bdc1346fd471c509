package as2

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"hash"
	"strings"
)

// MICAlgSHA256 is the MIC algorithm this package computes for the messages it
// sends, in the spelling of RFC 5751 §3.4.3.2 used by RFC 4130 §7.3.1.
const MICAlgSHA256 = "sha-256"

// newMICHash returns the hash for a MIC algorithm name, in RFC 5751 or
// RFC 3851 spelling, case-insensitively; nil if unsupported.
func newMICHash(alg string) hash.Hash {
	switch strings.ToLower(strings.TrimSpace(alg)) {
	case "sha-256", "sha256":
		return sha256.New()
	case "sha-384", "sha384":
		return sha512.New384()
	case "sha-512", "sha512":
		return sha512.New()
	case "sha-1", "sha1":
		return sha1.New()
	case "md5":
		return md5.New()
	}
	return nil
}

// ComputeMIC returns the MIC of content as a Received-Content-MIC value:
// base64 of the digest, ", ", and the algorithm as given (RFC 4130 §7.3.1),
// e.g. "kV3oG8...=, sha-256". Which bytes are content is the caller's choice:
// for an unsigned, unencrypted message it is the payload alone, without MIME
// headers. alg is one of sha-256 (recommended), sha-384, sha-512, sha-1 or
// md5; otherwise ComputeMIC returns an error wrapping [ErrMICAlgorithm].
func ComputeMIC(alg string, content []byte) (string, error) {
	h := newMICHash(alg)
	if h == nil {
		return "", fmt.Errorf("%w: %q", ErrMICAlgorithm, alg)
	}
	h.Write(content)
	return base64.StdEncoding.EncodeToString(h.Sum(nil)) + ", " + strings.TrimSpace(alg), nil
}

// ParseMIC splits a Received-Content-MIC value into its base64 digest and its
// algorithm, both trimmed. It returns an error wrapping [ErrMalformedMDN] if
// the value has no comma or an empty part.
func ParseMIC(v string) (digest, alg string, err error) {
	i := strings.LastIndexByte(v, ',')
	if i < 0 {
		return "", "", fmt.Errorf("%w: Received-Content-MIC %q has no algorithm", ErrMalformedMDN, v)
	}
	digest, alg = strings.TrimSpace(v[:i]), strings.TrimSpace(v[i+1:])
	if digest == "" || alg == "" {
		return "", "", fmt.Errorf("%w: Received-Content-MIC %q", ErrMalformedMDN, v)
	}
	return digest, alg, nil
}

// micMatches reports whether the MIC returned by a partner equals the MIC of
// content, computed with the algorithm the partner names. It returns an error
// wrapping ErrMICAlgorithm or ErrMalformedMDN when it cannot tell.
func micMatches(returned string, content []byte) (bool, error) {
	digest, alg, err := ParseMIC(returned)
	if err != nil {
		return false, err
	}
	want, err := ComputeMIC(alg, content)
	if err != nil {
		return false, err
	}
	wantDigest, _, _ := ParseMIC(want)
	return digest == wantDigest, nil
}
