package enrolment

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"time"
)

const (
	scriptDelimiter = "APELORA_ENROL_SCRIPT"
	tokenDelimiter  = "APELORA_JOIN_TOKEN"
)

// userDataTemplate is the cloud-init user data around enrol-member.sh. Its verbs: 1 the
// member name, 2 the join token's expiry, 3 the script's here-document delimiter, 4 the
// script (ending in a line break), 5 the cluster member whose route gives the address
// (shell-quoted), 6 the member name (shell-quoted), 7 the --member-config arguments, 8 the
// token's here-document delimiter, 9 the join token. What an administrator approves is
// this text by its SHA-256 (TemplateSHA256) with the values that are no secret and no
// clock: the token and its expiry are filled in at deploy, and no plan covers them.
const userDataTemplate = `#!/bin/sh
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
%[4]s%[3]s
address=$(ip -o route get %[5]s 2>/dev/null | sed -n 's/.* src \([^ ]*\).*/\1/p')
if [ -z "$address" ]; then
	log "cannot tell this machine's address towards the cluster member %[5]s"
	exit 1
fi
sh "$dir/enrol-member.sh" --name %[6]s --address "$address:8443"%[7]s <<'%[8]s'
%[9]s
%[8]s
`

// TemplateSHA256 is the SHA-256 of the user-data template, as a plan shows it.
func TemplateSHA256() string { return digest([]byte(userDataTemplate)) }

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// UserData returns the cloud-init user data that enrols a machine MAAS installs: it runs
// enrol-member.sh (script) with the member config, giving it the join token on standard
// input, as an administrator would by hand. The result holds the token: hand it to MAAS's
// deploy call only, never store, log or audit it.
//
// The new server's own address is the one its routing table uses towards the first
// cluster member, found when it runs.
func UserData(script []byte, a *Approval) ([]byte, error) {
	host, err := userDataChecks(script, a)
	if err != nil {
		return nil, err
	}
	token := a.Token.Reveal()
	if strings.ContainsAny(token, "\n'\\$` ") || token == "" {
		return nil, fmt.Errorf("the join token for %s is not in the expected form", a.Name)
	}
	body := string(script)
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, userDataTemplate, a.Name, a.ExpiresAt.UTC().Format(time.RFC3339), scriptDelimiter, body,
		shellQuote(host), shellQuote(a.Name), memberConfigArgs(a.MemberConfig), tokenDelimiter, token)
	return b.Bytes(), nil
}

// ShownUserData is the user data as a plan shows it and its hash covers: what the
// administrator approves (the enrolment script and the template, each by its SHA-256,
// the member name, the cluster member it contacts and the member config), never the
// rendered bytes, which hold the join token and its expiry (a new one at every call).
func ShownUserData(script []byte, a *Approval) (string, error) {
	host, err := userDataChecks(script, a)
	if err != nil {
		return "", err
	}
	cfg := shownConfig(a.MemberConfig)
	return fmt.Sprintf("enrol-member.sh %s, user-data template %s, member %s, contacting %s, member config: %s; the join token (and its expiry) is issued at deploy and never shown",
		digest(script), TemplateSHA256(), a.Name, host, cfg), nil
}

// userDataChecks refuses what cannot be put in the user data and returns the cluster
// member the new server contacts.
func userDataChecks(script []byte, a *Approval) (string, error) {
	if len(script) == 0 {
		return "", fmt.Errorf("no enrolment script to put in the user data")
	}
	for _, line := range strings.Split(string(script), "\n") {
		if line == scriptDelimiter || line == tokenDelimiter {
			return "", fmt.Errorf("the enrolment script contains the line %q, which would end its here-document", line)
		}
	}
	if len(a.Addresses) == 0 {
		return "", fmt.Errorf("the join token for %s names no cluster member to contact", a.Name)
	}
	host, _, err := net.SplitHostPort(a.Addresses[0])
	if err != nil {
		host = a.Addresses[0]
	}
	return host, nil
}

func memberConfigArgs(cfg []ConfigValue) string {
	var b strings.Builder
	for _, v := range cfg {
		fmt.Fprintf(&b, " --member-config %s", shellQuote(v.ID()+"="+v.Value))
	}
	return b.String()
}
