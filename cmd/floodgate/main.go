// Command floodgate is floodgate's command-line tool:
//
//	floodgate <command> [flags]
//
// Commands:
//
//	sim    simulate half-open strategies against a recovering dependency and
//	       compare them (table, JSON, Markdown, plot)
//
// "floodgate <command> -h" lists a command's flags. Exit status: 0 on
// success, 1 when the command failed, 2 for a bad command line (the message
// names the flag).
package main

import (
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

// commands lists the subcommands, in the order usage shows them. Later ones
// (backlog, replay, purge, status, open, close, reset) are added here.
var commands = []command{
	{name: "sim", summary: "simulate half-open strategies against a recovering dependency", run: runSim},
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
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "floodgate <command> -h" for a command's flags.`)
}
