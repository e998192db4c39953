package enrolment

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"time"
)

const (
	scriptDelimiter = "APELORA_ENROL_SCRIPT"
	tokenDelimiter  = "APELORA_JOIN_TOKEN"
)

// UserData returns the cloud-init user data that enrols a machine MAAS installs: it runs
// enrol-member.sh (script) with the member config, giving it the join token on standard
// input, as an administrator would by hand. The result holds the token: hand it to MAAS's
// deploy call only, never store, log or audit it.
//
// The new server's own address is the one its routing table uses towards the first
// cluster member, found when it runs.
func UserData(script []byte, a *Approval) ([]byte, error) {
	if len(script) == 0 {
		return nil, fmt.Errorf("no enrolment script to put in the user data")
	}
	for _, line := range strings.Split(string(script), "\n") {
		if line == scriptDelimiter || line == tokenDelimiter {
			return nil, fmt.Errorf("the enrolment script contains the line %q, which would end its here-document", line)
		}
	}
	if len(a.Addresses) == 0 {
		return nil, fmt.Errorf("the join token for %s names no cluster member to contact", a.Name)
	}
	host, _, err := net.SplitHostPort(a.Addresses[0])
	if err != nil {
		host = a.Addresses[0]
	}
	token := a.Token.Reveal()
	if strings.ContainsAny(token, "\n'\\$` ") || token == "" {
		return nil, fmt.Errorf("the join token for %s is not in the expected form", a.Name)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `#!/bin/sh
# Apelora fabric: enrol this machine as Incus cluster member %[1]s.
# Generated for one deployment; the join token below is single-use and expires %[2]s.
set -eu
log() { echo "apelora-enrol: $*" >&2; }
if ! command -v incus >/dev/null 2>&1; then
	log "installing Incus"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq incus ||
		{ log "could not install Incus: put it in the image, then run enrol-member.sh by hand with a new join token"; exit 1; }
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/enrol-member.sh" <<'%[3]s'
`, a.Name, a.ExpiresAt.UTC().Format(time.RFC3339), scriptDelimiter)
	b.Write(script)
	if !bytes.HasSuffix(script, []byte("\n")) {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, `%[1]s
address=$(ip -o route get %[2]s 2>/dev/null | sed -n 's/.* src \([^ ]*\).*/\1/p')
if [ -z "$address" ]; then
	log "cannot tell this machine's address towards the cluster member %[2]s"
	exit 1
fi
sh "$dir/enrol-member.sh" --name %[3]s --address "$address:8443"`, scriptDelimiter, shellQuote(host), shellQuote(a.Name))
	for _, v := range a.MemberConfig {
		fmt.Fprintf(&b, " --member-config %s", shellQuote(v.ID()+"="+v.Value))
	}
	fmt.Fprintf(&b, " <<'%s'\n%s\n%s\n", tokenDelimiter, token, tokenDelimiter)
	return b.Bytes(), nil
}
