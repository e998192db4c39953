// Command incus-lab keeps a real Incus cluster on loopback addresses running for a
// developer (scripts/run.sh starts a one-member one for the product): the same lab the
// Go tests start (testkit/incuslab), kept past this command. Needs root, Debian's
// incus-base and incus-client (scripts/test-deps.sh installs them).
//
//	incus-lab start [N] [DIR]   start an N-member cluster (default 3) in DIR; prints the env
//	incus-lab stop [DIR]        kill its daemons by their recorded pids and remove DIR
//	incus-lab status [DIR]      pids, process states and `incus cluster list`
//	incus-lab env [DIR]         print the APELORA_INCUS_* exports for the product
//	incus-lab cli MEMBER ARGS…  run the incus CLI against member MEMBER (m1, m2 …) of the lab
//
// DIR defaults to $APELORA_INCUS_LAB_DIR or /tmp/apelora-incus-lab. Members m1…mN listen on
// $APELORA_INCUS_LAB_BLOCK.1…N:8443 (block default 127.42.0; the Go tests use random blocks
// in 127.100-199.*), locked with the same lock files as the tests' labs; the daemons inherit
// the lock, so it is held while they run. m1 bootstraps the cluster with a dir storage pool
// "local"; the others join with tokens. A client certificate (DIR/client.crt,
// DIR/client.key) is trusted as Apelora's admin identity and DIR/cluster.crt is the
// certificate to pin: `eval "$(incus-lab env)"` points the product at member 1.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/apelora/fabric/testkit/incuslab"
)

const usage = `usage:
  incus-lab start [N] [DIR]   start an N-member cluster (default 3) in DIR; prints the env
  incus-lab stop [DIR]        kill its daemons by their recorded pids and remove DIR
  incus-lab status [DIR]      pids, process states and incus cluster list
  incus-lab env [DIR]         print the APELORA_INCUS_* exports for the product
  incus-lab cli MEMBER ARGS…  run the incus CLI against member MEMBER (m1, m2 …) of the lab
DIR defaults to $APELORA_INCUS_LAB_DIR or /tmp/apelora-incus-lab; the address block to
$APELORA_INCUS_LAB_BLOCK or 127.42.0.`

// errUsage is a command line that cannot run (exit 2).
var errUsage = errors.New(usage)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "incus-lab:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	cmd, rest := args[0], args[1:]
	dirArg := func(i int) (string, error) {
		dir := os.Getenv("APELORA_INCUS_LAB_DIR")
		if len(rest) > i {
			dir = rest[i]
		}
		if dir == "" {
			dir = "/tmp/apelora-incus-lab"
		}
		return filepath.Abs(dir)
	}
	switch cmd {
	case "start":
		n := 3
		if len(rest) > 0 {
			var err error
			if n, err = strconv.Atoi(rest[0]); err != nil || n < 1 || n > 50 {
				return fmt.Errorf("N must be a number from 1 to 50, not %q", rest[0])
			}
		}
		dir, err := dirArg(1)
		if err != nil {
			return err
		}
		return start(n, dir, stdout, stderr)
	case "stop":
		dir, err := dirArg(0)
		if err != nil {
			return err
		}
		if err := incuslab.Stop(dir); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "incus-lab: stopped and removed", dir)
		return nil
	case "status":
		dir, err := dirArg(0)
		if err != nil {
			return err
		}
		return status(dir, stdout, stderr)
	case "env":
		dir, err := dirArg(0)
		if err != nil {
			return err
		}
		env, err := os.ReadFile(filepath.Join(dir, "env"))
		if err != nil {
			return fmt.Errorf("no lab environment in %s (start one with: incus-lab start)", dir)
		}
		_, err = stdout.Write(env)
		return err
	case "cli":
		if len(rest) == 0 {
			return errUsage
		}
		dir, err := dirArg(99) // DIR comes from the environment only
		if err != nil {
			return err
		}
		return cli(dir, rest[0], rest[1:], stdout, stderr)
	}
	return errUsage
}

func start(n int, dir string, stdout, stderr io.Writer) error {
	incusd, cli, problem := incuslab.FindTools()
	if problem != "" {
		return fmt.Errorf("%s; install incus-base and incus-client from bookworm-backports (scripts/test-deps.sh) and run as root", problem)
	}
	if members, err := incuslab.Kept(dir); err == nil {
		for _, m := range members {
			if m.State != "dead" {
				return fmt.Errorf("a lab is already running in %s; run: incus-lab stop %s", dir, dir)
			}
		}
		if err := incuslab.Stop(dir); err != nil {
			return err
		}
	} else if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		return fmt.Errorf("%s exists and is not an incus-lab directory", dir)
	}
	block := os.Getenv("APELORA_INCUS_LAB_BLOCK")
	if block == "" {
		block = "127.42.0"
	}
	c, err := incuslab.Launch(incuslab.Options{Members: n, Incusd: incusd, CLI: cli, Dir: dir, Block: block, Keep: true})
	if err != nil {
		if c != nil {
			fmt.Fprintln(stderr, "incus-lab: start failed; the end of each member's log follows")
			logs, _ := filepath.Glob(filepath.Join(dir, "m*", "incusd.log"))
			for _, f := range logs {
				if log, rerr := os.ReadFile(f); rerr == nil {
					fmt.Fprintf(stderr, "--- %s\n%s\n", f, tail(string(log), 20))
				}
			}
			_ = c.Close()
		}
		return err
	}
	fmt.Fprintln(stderr, "incus-lab:", c.Summary())
	// The hint names this program as it was called (bin/incus-lab), so it works as printed.
	fmt.Fprintf(stderr, "incus-lab: environment for the product: eval \"$(%s env %s)\"\n", os.Args[0], dir)
	if out, err := c.CLI(c.Members[0], "cluster", "list"); err == nil {
		fmt.Fprint(stderr, out)
	}
	env, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		return err
	}
	_, err = stdout.Write(env)
	return err
}

func status(dir string, stdout, stderr io.Writer) error {
	members, err := incuslab.Kept(dir)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MEMBER\tADDRESS\tPID\tSTATE")
	var first *incuslab.KeptMember
	dead := false
	for i, m := range members {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", m.Name, m.Address, m.PID, m.State)
		dead = dead || m.State == "dead"
		if first == nil && m.State == "running" {
			first = &members[i]
		}
	}
	w.Flush()
	if first != nil {
		_, cli, problem := incuslab.FindTools()
		if problem != "" {
			return errors.New(problem)
		}
		fmt.Fprintln(stdout)
		c := incuslab.KeptCommand(dir, cli, *first, "cluster", "list")
		c.Stdout, c.Stderr = stdout, stderr
		if err := c.Run(); err != nil {
			return err
		}
	}
	if dead {
		return errors.New("a member is dead")
	}
	return nil
}

func cli(dir, member string, args []string, stdout, stderr io.Writer) error {
	members, err := incuslab.Kept(dir)
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.Name == member {
			_, cli, problem := incuslab.FindTools()
			if problem != "" {
				return errors.New(problem)
			}
			c := incuslab.KeptCommand(dir, cli, m, args...)
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, stdout, stderr
			return c.Run()
		}
	}
	return fmt.Errorf("no member %s in %s", member, dir)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			lines++
			if lines > n {
				return s[i+1:]
			}
		}
	}
	return s
}
