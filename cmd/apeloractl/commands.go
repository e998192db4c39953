package main

// apeloractl's commands. Each is declared in the file of its resource (machines.go,
// enrolment.go, members.go, maintenance.go, rolling.go, bulk.go, maas.go, hardware.go,
// fencing.go, placement.go, clusters.go, identities.go, audit.go, fleet.go, login.go) with its words in
// the usage text, the names it takes, its flags and the mutation it calls. This file lists
// them in the order `apeloractl help` shows them, turns a command line into the command it
// runs, and writes the usage text from the declarations.

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/apelora/fabric/internal/buildinfo"
)

// A command is one apeloractl command. One with a mutation is a change: it takes -dry-run
// and -plan-hash, which change (change.go) handles for every change the same way. The
// mutation is one declared in schema/ (@change, internal/mutations):
// TestEveryMutationHasItsCommand fails on a declared mutation no command calls and on a
// command naming a mutation that is not declared.
type command struct {
	// name is its first word; synopsis is what follows it in the usage text.
	name, synopsis string
	// doc says what it does in the usage text, its lines as they are wrapped there.
	doc string
	// use, when set, is the usage line its errors print instead of the synopsis (bulk's
	// names the flags of every step).
	use string
	// names is how many names it takes before its flags; more is how many more it may
	// take (-1: any number).
	names, more int
	// mutation is the declared change it makes; "" for a command that changes nothing.
	mutation string
	// plans: it takes -dry-run to plan other commands' changes (bulk), not -plan-hash.
	plans bool
	// flags declares its flags in fs and returns what runs it with their values; run runs
	// a command that takes no flags. A command with subcommands may have neither.
	flags func(fs *flag.FlagSet) runner
	run   runner
	// subs are its subcommands, each chosen by its name as the first argument
	// (rolling-reboot start …); when the first argument names none, the command itself
	// runs (placement-guard without on or off), or, with neither run nor flags, it is a
	// usage error. Their errors print the command's name and usage line.
	subs []*command
	// offline: it runs without the API (version, login, logout): it needs no token, and
	// -dry-run is a flag it does not take.
	offline bool
}

// A runner runs a command with the names given before its flags (its flags' values are
// in the closure its flags function returned).
type runner func(c *cli, ctx context.Context, names []string) error

// commandTable is every command, in the order the usage text lists them.
var commandTable = []*command{
	loginCommand, logoutCommand, whoamiCommand,
	machinesCommand, machineCommand, registerCommand, unregisterCommand,
	approveCommand, revokeCommand, reportCommand, admitCommand, removeCommand,
	evacuateCommand, restoreCommand, rollingRebootCommand, bulkCommand,
	auditCommand, watchAuditCommand, watchAdmissionCommand, fleetCommand, watchFleetCommand,
	commissionCommand, installCommand, hardwareTestCommand, releaseCommand,
	hardwareProfilesCommand, setHardwareProfileCommand, removeHardwareProfileCommand,
	assignHardwareProfileCommand, clearHardwareProfileCommand,
	fenceMappingsCommand, setFenceMappingCommand, removeFenceMappingCommand,
	identitiesCommand, createIdentityCommand, revokeIdentityCommand,
	placementGuardCommand, clustersCommand, registerClusterCommand, removeClusterCommand,
	versionCommand, helpCommand,
}

// commands are the names of every command: a mistyped one is refused before anything is
// asked of the server, with the nearest of these as a suggestion.
var commands = func() []string {
	names := make([]string, len(commandTable))
	for i, c := range commandTable {
		names[i] = c.name
	}
	return names
}()

var versionCommand = &command{
	name: "version", doc: "the version and the commit apeloractl was built from", offline: true,
	run: func(c *cli, _ context.Context, _ []string) error {
		fmt.Fprintln(c.out, buildinfo.Read().Line("apeloractl"))
		return nil
	},
}

// helpCommand prints the usage text: runCommand answers it before any other (the text
// is made from this table).
var helpCommand = &command{name: "help", doc: "this text", offline: true}

// commandNamed is the command of that name, or nil.
func commandNamed(name string) *command {
	i := slices.IndexFunc(commandTable, func(c *command) bool { return c.name == name })
	if i < 0 {
		return nil
	}
	return commandTable[i]
}

// head is the command with its synopsis, as the usage text starts its entry.
func (cmd *command) head() string {
	return strings.TrimSpace(cmd.name + " " + cmd.synopsis)
}

// useLine is the usage line its usage errors print.
func (cmd *command) useLine() string {
	if cmd.use != "" {
		return cmd.use
	}
	return "apeloractl " + cmd.head()
}

// help is its entry of the usage text, for `apeloractl COMMAND -h`.
func (cmd *command) help() string {
	out := []string{"usage: apeloractl " + cmd.head()}
	for l := range strings.SplitSeq(cmd.doc, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, "  "+l)
		}
	}
	return strings.Join(out, "\n")
}

// takesDryRun reports whether -dry-run is one of its flags.
func (cmd *command) takesDryRun() bool { return cmd.mutation != "" || cmd.plans }

// changeFlags are the flags a command takes beside its own: those of a change.
func (cmd *command) changeFlags() []string {
	switch {
	case cmd.mutation != "":
		return []string{"dry-run", "plan-hash"}
	case cmd.plans:
		return []string{"dry-run"}
	}
	return nil
}

// sub is the subcommand the arguments name, and the arguments after its name; the
// command itself when they name none and it runs without one.
func (cmd *command) sub(args []string) (*command, []string, error) {
	if len(cmd.subs) == 0 {
		return cmd, args, nil
	}
	if len(args) > 0 {
		for _, s := range cmd.subs {
			if s.name == args[0] {
				return s, args[1:], nil
			}
		}
	}
	if cmd.run != nil || cmd.flags != nil {
		return cmd, args, nil
	}
	return nil, nil, usageError(cmd.useLine())
}

// readOnly is the usage error for -dry-run given to sub, a command (of top) that changes
// nothing.
func readOnly(top, sub *command) error {
	path := top.name
	if sub != top {
		path += " " + sub.name
	}
	var changing []string
	for _, s := range top.subs {
		if s.mutation != "" {
			changing = append(changing, s.name)
		}
	}
	if len(changing) == 0 {
		return usageError(path + " changes nothing: -dry-run is for the commands that do (see `apeloractl help`)")
	}
	return usageError(path + " changes nothing: -dry-run and -plan-hash are for " + andList(changing))
}

// parse checks the names given to cmd (top, or one of its subcommands) and parses its
// flags: a flag it does not take, a name too many or too few are usage errors, refused
// before anything is asked of the server. It returns what runs the command and its names.
func (cmd *command) parse(top *command, args []string) (runner, []string, error) {
	use, extra := top.useLine(), cmd.changeFlags()
	if cmd.flags == nil {
		most := cmd.names + cmd.more
		if cmd.more < 0 {
			most = -1
		}
		if err := noFlags(top.name, args, most, use, extra); err != nil {
			return nil, nil, err
		}
		if len(args) < cmd.names {
			return nil, nil, usageError(use)
		}
		return cmd.run, args, nil
	}
	n := 0
	for n < len(args) && !isFlag(args[n]) && (cmd.more < 0 || n < cmd.names+cmd.more) {
		n++
	}
	if n < cmd.names {
		return nil, nil, usageError(use)
	}
	fs := newFlags(top.name)
	run := cmd.flags(fs)
	if err := parseFlags(fs, args[n:], use, extra); err != nil {
		return nil, nil, err
	}
	return run, args[:n], nil
}

// isFlag: a flag starts with a dash; a dash alone is a name (bulk: standard input).
func isFlag(arg string) bool { return strings.HasPrefix(arg, "-") && arg != "-" }

// usage is the usage text: `apeloractl help`, and what apeloractl prints without a
// command.
var usage = usageText()

func usageText() string {
	var b strings.Builder
	b.WriteString(`usage: apeloractl [-json] COMMAND [ARGS]

environment: APELORA_URL (default http://127.0.0.1:8080), APELORA_TOKEN (bearer token; when
unset, the session token "apeloractl login" kept in the user's config folder;
APELORA_SESSION_FILE to put it elsewhere)

commands:
`)
	for _, c := range commandTable {
		b.WriteString(c.entry())
	}
	// The changes, as the table declares them.
	var changes []string
	for _, c := range commandTable {
		var subs []string
		for _, s := range c.subs {
			if s.mutation != "" {
				subs = append(subs, s.name)
			}
		}
		switch {
		case len(subs) > 0:
			changes = append(changes, c.name+" "+strings.Join(subs, "|"))
		case c.takesDryRun():
			changes = append(changes, c.name)
		}
	}
	b.WriteString("\n")
	b.WriteString(wrap("-dry-run, after any command that changes something ("+strings.Join(changes, ", ")+
		"), changes nothing and prints the plan: the calls it would send to Incus, MAAS and the database, "+
		"and what would refuse or qualify it.", 90))
	b.WriteString(`A plan that would be refused exits as the call would (the refusal's code). It issues no
token and is no audit event. Its last line is the plan's hash: run the same command again
with -plan-hash HASH instead of -dry-run to make the change only while its plan is still
that one (else PLAN_CHANGED: nothing changed, look again). Without -plan-hash the audit
event says no plan was shown.

A mistyped command or flag, and a flag a command does not take, are usage errors (exit
status 2) that name the nearest command or flag. A server that cannot be reached is
UNAVAILABLE: cannot reach APELORA_URL (its address and why): is apelora serve running?

errors are printed as CODE: message (the API's extensions.code). exit status:
  0 done   1 any other error   2 usage   3 UNAUTHENTICATED (no or wrong token)
  4 FORBIDDEN (the identity lacks a permission)
`)
	return b.String()
}

// docColumn is where the usage text's descriptions start.
const docColumn = 34

// entry is the command's entry in the usage text: its head, then what it does from
// docColumn on (on the same line when the head leaves room).
func (cmd *command) entry() string {
	head := "  " + cmd.head()
	lines := strings.Split(cmd.doc, "\n")
	var b strings.Builder
	if cmd.doc != "" && len(head) < docColumn {
		b.WriteString(head + strings.Repeat(" ", docColumn-len(head)) + lines[0] + "\n")
		lines = lines[1:]
	} else {
		b.WriteString(head + "\n")
		if cmd.doc == "" {
			lines = nil
		}
	}
	for _, l := range lines {
		b.WriteString(strings.Repeat(" ", docColumn) + l + "\n")
	}
	return b.String()
}

// wrap breaks text into lines of at most width characters, at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	line := 0
	for i, w := range strings.Fields(text) {
		switch {
		case i == 0:
		case line+1+len(w) > width:
			b.WriteString("\n")
			line = 0
		default:
			b.WriteString(" ")
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	b.WriteString("\n")
	return b.String()
}

// andList is "a", "a and b", "a, b and c".
func andList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
