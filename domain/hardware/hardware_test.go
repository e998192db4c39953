package hardware

import (
	"strings"
	"testing"

	"github.com/apelora/fabric/internal/apperr"
)

func gen2() Profile {
	p, err := Declaration{Name: "gen2", Architecture: "amd64", MinCPUCores: 32, MinMemoryMiB: 131072,
		MinDisks: 2, MinDiskSizeGB: 960, MinNICs: 2, MinNICSpeedMbps: 25000}.Profile()
	if err != nil {
		panic(err)
	}
	return p
}

// meets is a machine that has exactly what gen2 wants, as MAAS spells it.
func meets() Inventory {
	return Inventory{
		Architecture: "amd64/generic", CPUCores: 32, MemoryMiB: 131072,
		Disks: []Disk{{"sda", 960_197_124_096}, {"sdb", 960_197_124_096}},
		NICs:  []NIC{{"eno1", 25000}, {"eno2", 25000}},
	}
}

func finding(c Comparison, aspect string) Finding {
	for _, f := range c.Findings {
		if f.Aspect == aspect {
			return f
		}
	}
	return Finding{Aspect: "missing"}
}

func TestAMachineThatMeetsTheProfilePasses(t *testing.T) {
	c := Compare(gen2(), meets())
	if c.Outcome() != Met {
		t.Fatalf("outcome %v: %s", c.Outcome(), c.Describe("MAAS"))
	}
	d := c.Describe("MAAS")
	for _, want := range []string{`MAAS reports what profile "gen2" wants`, "x86_64", "32 CPU cores", "131072 MiB (128 GiB)", "2 disks of at least 960 GB", "2 NICs of at least 25000 Mbit/s"} {
		if !strings.Contains(d, want) {
			t.Errorf("description %q lacks %q", d, want)
		}
	}
	// More than asked is fine.
	inv := meets()
	inv.CPUCores, inv.MemoryMiB = 128, 1<<20
	inv.Disks = append(inv.Disks, Disk{"nvme0n1", 3_840_000_000_000})
	inv.NICs[0].SpeedMbps = 100000
	if c := Compare(gen2(), inv); c.Outcome() != Met {
		t.Fatalf("a bigger machine: %s", c.Describe("Incus"))
	}
}

func TestEveryShortfallIsUnmetWithBothValues(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Inventory)
		aspect string
		says   []string
	}{
		{"fewer cores", func(i *Inventory) { i.CPUCores = 16 }, "cpu", []string{"wants at least 32 CPU cores", "MAAS reports 16 CPU cores"}},
		{"less memory", func(i *Inventory) { i.MemoryMiB = 65536 }, "memory", []string{"at least 131072 MiB (128 GiB) of memory", "MAAS reports 65536 MiB (64 GiB) of memory"}},
		{"one disk too small", func(i *Inventory) { i.Disks[1].SizeBytes = 480_103_981_056 }, "disks", []string{"wants at least 2 disks of at least 960 GB", "MAAS reports 1 disk of at least 960 GB (sda 960 GB, sdb 480 GB)"}},
		{"one disk missing", func(i *Inventory) { i.Disks = i.Disks[:1] }, "disks", []string{"MAAS reports 1 disk of at least 960 GB (sda 960 GB)"}},
		{"slow NIC", func(i *Inventory) { i.NICs[1].SpeedMbps = 10000 }, "nics", []string{"wants at least 2 NICs of at least 25000 Mbit/s", "MAAS reports 1 NIC of at least 25000 Mbit/s (eno1 25000 Mbit/s, eno2 10000 Mbit/s)"}},
		{"another architecture", func(i *Inventory) { i.Architecture = "arm64/generic" }, "architecture", []string{"wants x86_64, MAAS reports aarch64"}},
		{"an unfamiliar architecture", func(i *Inventory) { i.Architecture = "pdp11/generic" }, "architecture", []string{`the unfamiliar architecture "pdp11/generic"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inv := meets()
			tc.change(&inv)
			c := Compare(gen2(), inv)
			if c.Outcome() != Unmet || finding(c, tc.aspect).Outcome != Unmet {
				t.Fatalf("outcome %v, %s %v", c.Outcome(), tc.aspect, finding(c, tc.aspect))
			}
			d := c.Describe("MAAS")
			if !strings.HasPrefix(d, `profile "gen2" wants`) {
				t.Errorf("description %q", d)
			}
			for _, want := range tc.says {
				if !strings.Contains(d, want) {
					t.Errorf("description %q lacks %q", d, want)
				}
			}
			// Only what differs is listed.
			if strings.Count(d, "reports") != 1 {
				t.Errorf("description lists more than the one difference: %q", d)
			}
		})
	}
}

func TestUnknownSpeedsAndCountsAreNotFailures(t *testing.T) {
	inv := meets()
	inv.NICs[1].SpeedMbps = 0 // no link at commissioning
	c := Compare(gen2(), inv)
	if c.Outcome() != Unknown {
		t.Fatalf("one NIC of unknown speed could make up the number: %v %s", c.Outcome(), c.Describe("Incus"))
	}
	if d := c.Describe("Incus"); !strings.Contains(d, "Incus reports 1 NIC of at least 25000 Mbit/s and 1 of unknown speed (eno1 25000 Mbit/s, eno2 speed unknown)") {
		t.Fatalf("description %q", d)
	}
	// Unknown speed cannot make up for a missing NIC.
	inv.NICs = inv.NICs[1:]
	if c := Compare(gen2(), inv); c.Outcome() != Unmet {
		t.Fatalf("one NIC of unknown speed where two are wanted: %v", c.Outcome())
	}
	// Without a speed requirement every NIC counts.
	p := gen2()
	p.MinNICSpeedMbps = 0
	inv = meets()
	inv.NICs[0].SpeedMbps, inv.NICs[1].SpeedMbps = 0, 0
	if c := Compare(p, inv); c.Outcome() != Met {
		t.Fatalf("NIC count only: %s", c.Describe("Incus"))
	}
	// No CPU count or memory size at all: unknown, not a shortfall.
	inv = meets()
	inv.CPUCores, inv.MemoryMiB, inv.Architecture = 0, 0, ""
	c = Compare(gen2(), inv)
	for _, a := range []string{"cpu", "memory", "architecture"} {
		if finding(c, a).Outcome != Unknown {
			t.Errorf("%s: %+v", a, finding(c, a))
		}
	}
}

func TestOnlyWhatTheProfileAsksForIsCompared(t *testing.T) {
	p, err := Declaration{Name: "any-arm", Architecture: "aarch64"}.Profile()
	if err != nil {
		t.Fatal(err)
	}
	c := Compare(p, Inventory{Architecture: "arm64/generic", CPUCores: 1, MemoryMiB: 512})
	if c.Outcome() != Met || len(c.Findings) != 1 {
		t.Fatalf("%v %+v", c.Outcome(), c.Findings)
	}
	if p.Wants() != "aarch64" || !strings.Contains(gen2().Wants(), "at least 2 NICs of at least 25000 Mbit/s") {
		t.Fatalf("wants %q / %q", p.Wants(), gen2().Wants())
	}
	if !(Inventory{}).Empty() || meets().Empty() {
		t.Fatal("Empty")
	}
}

func TestDeclarationsAreValidatedNamingTheField(t *testing.T) {
	ok := Declaration{Name: "gen2", Architecture: "x86_64"}
	cases := []struct {
		name   string
		change func(*Declaration)
		field  string
		says   string
	}{
		{"empty name", func(d *Declaration) { d.Name = "" }, "profile", "empty"},
		{"upper case", func(d *Declaration) { d.Name = "Gen2" }, "profile", "lower-case"},
		{"long name", func(d *Declaration) { d.Name = strings.Repeat("a", 64) }, "profile", "64 characters"},
		{"NUL in name", func(d *Declaration) { d.Name = "gen\x002" }, "profile", "not valid"},
		{"unknown architecture", func(d *Declaration) { d.Architecture = "pdp11" }, "architecture", "x86_64"},
		{"empty architecture", func(d *Declaration) { d.Architecture = "" }, "architecture", "unknown architecture"},
		{"huge architecture", func(d *Declaration) { d.Architecture = strings.Repeat("x", 1<<20) }, "architecture", "…"},
		{"negative cores", func(d *Declaration) { d.MinCPUCores = -1 }, "minCpuCores", "negative"},
		{"absurd cores", func(d *Declaration) { d.MinCPUCores = 1 << 20 }, "minCpuCores", "no server"},
		{"absurd memory", func(d *Declaration) { d.MinMemoryMiB = 1 << 40 }, "minMemoryMiB", "check the unit"},
		{"negative disks", func(d *Declaration) { d.MinDisks = -3 }, "minDisks", "negative"},
		{"absurd disk size", func(d *Declaration) { d.MinDisks, d.MinDiskSizeGB = 1, 960_000_000_000 }, "minDiskSizeGB", "no server"},
		{"disk size without count", func(d *Declaration) { d.MinDiskSizeGB = 960 }, "minDisks", "how many disks"},
		{"negative NICs", func(d *Declaration) { d.MinNICs = -1 }, "minNics", "negative"},
		{"absurd speed", func(d *Declaration) { d.MinNICs, d.MinNICSpeedMbps = 1, 100_000_000 }, "minNicSpeedMbps", "no server"},
		{"speed without count", func(d *Declaration) { d.MinNICSpeedMbps = 10000 }, "minNics", "how many NICs"},
		{"control character", func(d *Declaration) { d.Description = "a\x1bb" }, "description", "control"},
		{"invalid UTF-8", func(d *Declaration) { d.Description = "a\xffb" }, "description", "UTF-8"},
		{"long description", func(d *Declaration) { d.Description = strings.Repeat("é", 1025) }, "description", "1024"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := ok
			tc.change(&d)
			_, err := d.Profile()
			e, isApp := apperr.As(err)
			if !isApp || e.Code != apperr.InvalidInput || e.Field != tc.field || !strings.Contains(e.Message, tc.says) {
				t.Fatalf("got %v (field %q), want INVALID_INPUT on %s saying %q", err, fieldOf(e), tc.field, tc.says)
			}
			if len(e.Message) > 600 {
				t.Fatalf("the message quotes too much of the bad value: %d bytes", len(e.Message))
			}
		})
	}
	for in, want := range map[string]string{"amd64": "x86_64", "ARM64": "aarch64", "ppc64el": "ppc64le", " x86_64 ": "x86_64", "amd64/hwe-24.04": "x86_64"} {
		d := ok
		d.Architecture = in
		p, err := d.Profile()
		if err != nil || p.Architecture != want {
			t.Errorf("architecture %q → %q, %v; want %q", in, p.Architecture, err, want)
		}
	}
	if _, err := (Declaration{Name: "full", Architecture: "x86_64", MinCPUCores: MaxCPUCores, MinMemoryMiB: MaxMemoryMiB,
		MinDisks: MaxDisks, MinDiskSizeGB: MaxDiskSizeGB, MinNICs: MaxNICs, MinNICSpeedMbps: MaxNICSpeedMbps}).Profile(); err != nil {
		t.Fatalf("the limits themselves are allowed: %v", err)
	}
}

func fieldOf(e *apperr.Error) string {
	if e == nil {
		return ""
	}
	return e.Field
}
