// Package scripts embeds the scripts Apelora serves to the servers it enrols.
package scripts

import _ "embed"

// EnrolMember is enrol-member.sh, served at GET /enrol/enrol-member.sh: run on a new server,
// it joins the Incus cluster with the join token read from standard input, then sets
// scheduler.instance=manual on the new member.
//
//go:embed enrol-member.sh
var EnrolMember []byte
