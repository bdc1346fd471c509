// Package natsserver starts an embedded NATS server with JetStream enabled,
// in-process, for the examples and the integration tests.
//
// The server listens on a loopback address (127.0.0.1 by default) on a random
// free port unless one is given, and stores JetStream data in files under a
// store directory: a new temporary directory by default, removed by
// [Server.Shutdown]. [Server.Restart] stops the server and starts it again on
// the same port with the same store directory, so streams, consumers and
// their acknowledgement state survive it, as they would survive a real server
// restart; tests use it to restart the server in the middle of a diversion or
// a drain.
//
// The server writes no log output unless [Options.Log] is set.
package natsserver
