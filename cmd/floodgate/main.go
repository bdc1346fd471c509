// Command floodgate is floodgate's command-line tool:
//
//	floodgate <command> [flags]
//
// Commands:
//
//	sim      simulate half-open strategies against a recovering dependency and
//	         compare them (table, JSON, Markdown, plot)
//	backlog  show retry and dead-letter depth by original topic
//	deadletters list dead letters, or show one (reason, last error, attempt
//	         history, route, size, payload preview)
//	replay   move dead letters back into the retry queue (all, by topic, reason or age)
//	purge    remove dead letters (or the retry backlog) for good; needs -yes
//	status   list partners and fleet-wide breakers: state, open window, backlog
//	open     force a fleet-wide breaker open on every replica
//	close    close a fleet-wide breaker on every replica
//	reset    reset a fleet-wide breaker on every replica
//	permissions print the NATS permissions of a service's user or an
//	         operator's read-only or read-write user
//
// "floodgate <command> -h" lists a command's flags. Exit status: 0 on
// success, 1 when the command failed, 2 for a bad command line (the message
// names the flag).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// command is one subcommand: floodgate <name> [flags].
type command struct {
	name    string
	summary string
	// run executes the command with its arguments (after the name) and
	// returns the exit status.
	run func(args []string, stdout, stderr io.Writer) int
}

// commands lists the subcommands, in the order usage shows them.
var commands = []command{
	{name: "sim", summary: "simulate half-open strategies against a recovering dependency", run: runSim},
	{name: "backlog", summary: "show retry and dead-letter depth by original topic", run: runBacklog},
	{name: "deadletters", summary: "list dead letters (filter by reason, topic, route, age) or show one: error, history, payload", run: runDeadLetters},
	{name: "replay", summary: "move dead letters back into the retry queue (all, by original topic, reason or age)", run: runReplay},
	{name: "purge", summary: "remove dead letters (or the retry backlog) for good; needs -yes", run: runPurge},
	{name: "migrate", summary: "move the previous release's retry and dead-letter streams to the route layout", run: runMigrate},
	{name: "status", summary: "list partners and fleet-wide breakers: state, open window, backlog", run: runStatus},
	{name: "open", summary: "force a fleet-wide breaker open on every replica (isolate a partner)", run: runOpen},
	{name: "close", summary: "close a fleet-wide breaker on every replica, keeping its backoff", run: runClose},
	{name: "reset", summary: "reset a fleet-wide breaker on every replica: closed, backoff at base", run: runReset},
	{name: "permissions", summary: "print the NATS permissions of a service's user or an operator's (ro, rw)", run: runPermissions},
}

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run dispatches args to a subcommand and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(args) > 1 {
			if c := lookup(args[1]); c != nil {
				return c.run([]string{"-h"}, stdout, stderr)
			}
			fmt.Fprintf(stderr, "floodgate: unknown command %q\n\n", args[1])
			usage(stderr)
			return exitUsage
		}
		usage(stdout)
		return exitOK
	}
	if c := lookup(name); c != nil {
		return c.run(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "floodgate: unknown command %q\n\n", name)
	usage(stderr)
	return exitUsage
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: floodgate <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "floodgate <command> -h" for a command's flags.`)
}

// errReported marks a flag error parseFlags has already printed.
var errReported = errors.New("bad command line (reported)")

// parseFlags parses args with fs (named "floodgate <command>"). On -h it
// prints fs's usage and returns flag.ErrHelp; on a bad flag it prints the
// error once and a line pointing at -h, not the whole usage, and returns
// errReported.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		stderr.Write(buf.Bytes())
		return err
	}
	fmt.Fprintf(stderr, "%s: %v\nrun '%s -h' for usage\n", fs.Name(), err, fs.Name())
	return errReported
}
