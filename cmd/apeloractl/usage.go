package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
)

// helpAsked is -h or help: the text goes to standard output and apeloractl exits 0.
type helpAsked string

func (h helpAsked) Error() string { return string(h) }

// unknownCommand is the usage error for a command apeloractl does not have, with the
// nearest ones it has.
func unknownCommand(cmd string) error {
	msg := fmt.Sprintf("unknown command %q", cmd)
	if near := nearest(cmd, commands); len(near) > 0 {
		msg += ": did you mean " + orList(near) + "?"
	}
	return usageError(msg + " (apeloractl help lists every command)")
}

// newFlags is a command's flag set. It prints nothing itself: parseFlags turns what it
// refuses into one usage error.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses a command's flags and refuses, as a usage error (exit status 2), a
// flag the command does not take (naming the nearest it does, or of extra: those every
// change takes, which apeloractl takes out before) and any argument left after the flags,
// which flag would otherwise ignore with every flag after it.
func parseFlags(fs *flag.FlagSet, args []string, use string, extra []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpAsked("usage: " + use)
		}
		return usageError(flagProblem(fs, err, extra) + "\n  " + use)
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Sprintf("%s: unexpected argument %q (flags come after the names)\n  %s", fs.Name(), fs.Arg(0), use))
	}
	return nil
}

// noFlags refuses arguments to a command that takes only names: a flag (none is
// defined; extra are those every change takes, named when one is near), or more names
// than it takes (max; -1 for any number).
func noFlags(cmd string, args []string, max int, use string, extra []string) error {
	for _, a := range args {
		if isFlag(a) {
			msg := fmt.Sprintf("%s: flag provided but not defined: %s", cmd, a)
			if near := nearest(strings.TrimLeft(a, "-"), extra); len(near) > 0 {
				msg += ": did you mean -" + near[0] + "?"
			}
			return usageError(msg + "\n  " + use)
		}
	}
	if max >= 0 && len(args) > max {
		return usageError(fmt.Sprintf("%s: unexpected argument %q\n  %s", cmd, args[max], use))
	}
	return nil
}

// flagProblem words flag's refusal, with the nearest flag the set defines (or of extra).
func flagProblem(fs *flag.FlagSet, err error, extra []string) string {
	msg := fs.Name() + ": " + err.Error()
	const undefined = "flag provided but not defined: "
	if name, ok := strings.CutPrefix(err.Error(), undefined); ok {
		var defined []string
		fs.VisitAll(func(f *flag.Flag) { defined = append(defined, f.Name) })
		defined = append(defined, extra...)
		if near := nearest(strings.TrimLeft(name, "-"), defined); len(near) > 0 {
			for i := range near {
				near[i] = "-" + near[i]
			}
			msg += ": did you mean " + orList(near) + "?"
		}
	}
	return msg
}

// nearest are the candidates closest to word by edit distance (a letter added, removed,
// changed, or two neighbours swapped), within a bound that grows with the word's length,
// and the candidates word is the start of; best first, at most three.
func nearest(word string, candidates []string) []string {
	if word == "" {
		return nil
	}
	bound := min(1+len(word)/4, 3)
	type scored struct {
		name string
		d    int
	}
	var found []scored
	for _, c := range candidates {
		d := distance(word, c)
		if d > bound && !(len(word) >= 3 && strings.HasPrefix(c, word)) {
			continue
		}
		found = append(found, scored{c, d})
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].d < found[j].d })
	var out []string
	for _, f := range found {
		if len(out) == 3 {
			break
		}
		if !slices.Contains(out, f.name) {
			out = append(out, f.name)
		}
	}
	return out
}

// distance is the optimal string alignment distance between a and b: insertions,
// deletions, substitutions and swaps of two neighbours each cost one.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

func orList(names []string) string {
	switch len(names) {
	case 1:
		return names[0]
	case 2:
		return names[0] + " or " + names[1]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// baseURL is the server apeloractl talks to: APELORA_URL, or the default.
func baseURL() string {
	base := strings.TrimSuffix(os.Getenv("APELORA_URL"), "/")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	return base
}
