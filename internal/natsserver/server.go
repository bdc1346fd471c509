package natsserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options configures [Start]. The zero value is valid.
type Options struct {
	// Host is the address the server listens on.
	// Optional. Default "127.0.0.1".
	Host string
	// Port is the TCP port for clients.
	// Optional. Default 0, which picks a random free port; -1 does the same.
	// Valid range -1..65535.
	Port int
	// StoreDir is the JetStream file-storage directory. It is created if
	// missing and is never removed by this package when given.
	// Optional. Default a new temporary directory, removed by [Server.Shutdown].
	StoreDir string
	// ReadyTimeout bounds how long [Start] and [Server.Restart] wait for the
	// server to accept connections.
	// Optional. Default 10s.
	ReadyTimeout time.Duration
	// Log enables the server's own log output (notices and errors, on
	// standard error).
	// Optional. Default false: no output.
	Log bool
	// MaxPayload is the server's max_payload: the largest message (headers
	// and payload) a client may publish, in bytes.
	// Optional. Default 0: the server's default, 1 MiB. Valid range >= 0.
	MaxPayload int32
	// User and Password, when User is set, are the only credentials the
	// server accepts.
	// Optional. Default "": no user authentication.
	User, Password string
	// Token, when set, is the only token the server accepts (exclusive
	// with User).
	// Optional. Default "": no token authentication.
	Token string
	// TLS, when set, makes the server require TLS on client connections
	// with this config; a config with ClientAuth
	// tls.RequireAndVerifyClientCert also requires client certificates
	// (mTLS). See tls.go.
	// Optional. Default nil: plain TCP.
	TLS *tls.Config
	// Users, when set, are the users the server accepts, each with its
	// publish and subscribe permissions (exclusive with User and Token).
	// A user with nil Permissions may do anything.
	// Optional. Default nil.
	Users []*server.User
}

// ErrInvalidPort is returned by [Start] when [Options.Port] is outside -1..65535.
var ErrInvalidPort = errors.New("natsserver: port must be in -1..65535")

// ErrNotReady is returned when the server did not accept connections within
// [Options.ReadyTimeout].
var ErrNotReady = errors.New("natsserver: server not ready for connections")

// Server is an embedded NATS server with JetStream. Its methods are safe for
// concurrent use.
type Server struct {
	mu       sync.Mutex
	opts     Options
	ownStore bool
	srv      *server.Server
	port     int
}

// Start starts a NATS server with JetStream and file storage and waits until
// it accepts connections. It returns [ErrInvalidPort], [ErrNotReady], or the
// error of creating the store directory or the server.
func Start(opts Options) (*Server, error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port < -1 || opts.Port > 65535 {
		return nil, fmt.Errorf("%w: got %d", ErrInvalidPort, opts.Port)
	}
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 10 * time.Second
	}
	s := &Server{opts: opts}
	if s.opts.StoreDir == "" {
		dir, err := os.MkdirTemp("", "floodgate-nats-")
		if err != nil {
			return nil, fmt.Errorf("natsserver: store dir: %w", err)
		}
		s.opts.StoreDir = dir
		s.ownStore = true
	} else if err := os.MkdirAll(s.opts.StoreDir, 0o755); err != nil {
		return nil, fmt.Errorf("natsserver: store dir: %w", err)
	}
	if err := s.start(s.opts.Port); err != nil {
		if s.ownStore {
			_ = os.RemoveAll(s.opts.StoreDir)
		}
		return nil, err
	}
	return s, nil
}

// start runs a new server instance on port. It requires s.mu held or s not
// yet shared.
func (s *Server) start(port int) error {
	so := &server.Options{
		Host:          s.opts.Host,
		Port:          port,
		JetStream:     true,
		StoreDir:      s.opts.StoreDir,
		NoLog:         !s.opts.Log,
		NoSigs:        true,
		MaxPayload:    s.opts.MaxPayload,
		Username:      s.opts.User,
		Password:      s.opts.Password,
		Authorization: s.opts.Token,
		Users:         s.opts.Users,
	}
	s.applyTLS(so)
	srv, err := server.NewServer(so)
	if err != nil {
		return fmt.Errorf("natsserver: %w", err)
	}
	if s.opts.Log {
		srv.ConfigureLogger()
	}
	srv.Start()
	if !srv.ReadyForConnections(s.opts.ReadyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("%w within %s", ErrNotReady, s.opts.ReadyTimeout)
	}
	s.srv = srv
	if a, ok := srv.Addr().(*net.TCPAddr); ok {
		s.port = a.Port
	}
	return nil
}

// ClientURL returns the URL clients connect to, e.g. "nats://127.0.0.1:4222",
// or "tls://…" with [Options.TLS].
// It stays the same across [Server.Restart].
func (s *Server) ClientURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	scheme := "nats"
	if s.opts.TLS != nil {
		scheme = "tls"
	}
	return fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(s.opts.Host, fmt.Sprint(s.port)))
}

// Port returns the TCP port the server listens on.
func (s *Server) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// StoreDir returns the JetStream store directory.
func (s *Server) StoreDir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opts.StoreDir
}

// Running reports whether the server is started and not stopped.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv != nil && s.srv.Running()
}

// Stop shuts the server down and waits until it stopped, keeping the store
// directory, so [Server.Restart] can start it again with its data. Client
// connections see the server as gone and start reconnecting. Stop on a
// stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop()
}

// stop requires s.mu held.
func (s *Server) stop() {
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// Restart stops the server if it is running and starts it again on the same
// host, port and store directory, waiting until it accepts connections.
// Streams, consumers and their acknowledgement state survive it. Clients
// connected with reconnection enabled (the nats.go default) reconnect by
// themselves. It returns [ErrNotReady] or the server's start error.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop()
	return s.start(s.port)
}

// Shutdown stops the server and removes the store directory if [Start]
// created it. It is safe to call more than once.
func (s *Server) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop()
	if s.ownStore {
		_ = os.RemoveAll(s.opts.StoreDir)
		s.ownStore = false
	}
}
