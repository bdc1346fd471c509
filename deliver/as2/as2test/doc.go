// Package as2test makes throwaway AS2 key material for examples and tests: a
// certificate authority, the sender's certificate and key, and the partner's
// certificate and key, all generated in memory, and the matched
// [as2.Config] and [as2partner.Config] that make a [as2.Sender] and an
// [as2partner.Partner] speak signed and encrypted AS2 with signed MDNs to
// each other.
//
//	pki, err := as2test.New("NORTHWINDRTL", "BLUEWATERHG")
//	partnerCfg := pki.PartnerConfig()
//	partnerCfg.Script = script
//	partner, err := as2partner.New(partnerCfg)
//	srv := httptest.NewServer(partner)
//	sender, err := as2.NewSender(pki.SenderConfig(srv.URL))
//
// The keys are RSA 2048 (what AS2 partners use; RSA key transport needs
// RSA), the CA key ECDSA P-256. Certificates are valid from an hour ago for
// a year. Nothing here is fit for production use.
package as2test
