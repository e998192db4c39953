package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	vcs := &debug.BuildInfo{
		Main: debug.Module{Version: "v0.0.0-20261203220000-e8ccc8a2b0c1+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "e8ccc8a2b0c1e8ccc8a2b0c1e8ccc8a2b0c1e8cc"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	for _, c := range []struct {
		name, version, commit string
		bi                    *debug.BuildInfo
		want                  string
	}{
		{"stamped by package.sh", "0.1.0~git20261203.e8ccc8a", "0123456789abcdef", vcs,
			"apelora 0.1.0~git20261203.e8ccc8a (commit 0123456789abcdef)"},
		{"plain go build in a checkout", "", "", vcs,
			"apelora v0.0.0-20261203220000-e8ccc8a2b0c1+dirty (commit e8ccc8a2b0c1e8ccc8a2b0c1e8ccc8a2b0c1e8cc, with uncommitted changes)"},
		{"go build -buildvcs=false", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			"apelora devel (commit unknown)"},
		{"no build information", "", "", nil, "apelora devel (commit unknown)"},
		{"version stamped, commit from the checkout", "1.2.3", "", vcs,
			"apelora 1.2.3 (commit e8ccc8a2b0c1e8ccc8a2b0c1e8ccc8a2b0c1e8cc, with uncommitted changes)"},
	} {
		if got := from(c.version, c.commit, c.bi).Line("apelora"); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
