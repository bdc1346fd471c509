package natsserver

import (
	"crypto/tls"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// tlsTimeout bounds the server's TLS handshake; generous, for loaded CI.
const tlsTimeout = 5 * time.Second

// applyTLS sets so up for [Options.TLS]: TLS required of every client,
// and client certificates verified when the config requires them.
func (s *Server) applyTLS(so *server.Options) {
	c := s.opts.TLS
	if c == nil {
		return
	}
	so.TLS = true
	so.TLSConfig = c.Clone()
	so.TLSVerify = c.ClientAuth == tls.RequireAndVerifyClientCert
	so.TLSTimeout = tlsTimeout.Seconds()
}
