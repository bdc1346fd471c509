// Package natsconn holds the NATS connection options of floodgate's
// command line and examples, named and resolved as the nats CLI does:
// --server/-s (env NATS_URL), --context (env NATS_CONTEXT; a context
// name, or the path of a context's .json file), --creds, --nkey,
// --user/--password, --token, --tlscert/--tlskey/--tlsca.
//
// Contexts are read with the NATS project's own library,
// github.com/nats-io/jsm.go/natscontext: a named context from
// $XDG_CONFIG_HOME/nats/context (default ~/.config/nats/context), or the
// selected one ("nats context select") when --context is not given. A flag
// or environment variable given overrides the context's field.
//
// Secrets never reach the output: [Redact] removes user information from
// URLs, and the errors of [Options.Connect] name the server redacted.
package natsconn
