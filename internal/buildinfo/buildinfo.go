// Package buildinfo says which build of Apelora is running, for the `version` commands:
// the version and commit scripts/package.sh stamps in with -ldflags -X, else what the Go
// toolchain recorded from the checkout (-buildvcs, on by default), so that a plain
// `go build` still names its commit.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Set by scripts/package.sh:
//
//	-ldflags "-X github.com/apelora/fabric/internal/buildinfo.version=V -X github.com/apelora/fabric/internal/buildinfo.commit=C"
var version, commit string

// Info names a build.
type Info struct {
	Version  string // the package version, or the module's (a pseudo-version from the checkout), or "devel"
	Commit   string // the full commit hash, or "unknown"
	Modified bool   // built from a checkout with uncommitted changes (known only from -buildvcs)
}

// Read returns this binary's build.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return from(version, commit, bi)
}

// from prefers the stamped values and fills what is missing from the toolchain's record.
func from(stampedVersion, stampedCommit string, bi *debug.BuildInfo) Info {
	info := Info{Version: stampedVersion, Commit: stampedCommit}
	if bi != nil {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if info.Commit == "" {
					info.Commit = s.Value
				}
			case "vcs.modified":
				// Only when the commit came from the same record: a stamped commit says
				// so itself (package.sh adds -dirty).
				info.Modified = stampedCommit == "" && s.Value == "true"
			}
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

// Line is what `PROGRAM version` prints: "apelora 0.1.0 (commit 0123abc…)".
func (i Info) Line(program string) string {
	modified := ""
	if i.Modified {
		modified = ", with uncommitted changes"
	}
	return fmt.Sprintf("%s %s (commit %s%s)", program, i.Version, i.Commit, modified)
}
