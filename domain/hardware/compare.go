package hardware

import (
	"fmt"
	"strings"
)

// Disk is one disk of an inventory.
type Disk struct {
	Name      string
	SizeBytes int64
}

// NIC is one network port. SpeedMbps is its link speed in Mbit/s, 0 when not known (no
// link, or a driver that does not say).
type NIC struct {
	Name      string
	SpeedMbps int
}

// Inventory is the hardware one source reports for a machine: MAAS at commissioning, or
// Incus now.
type Inventory struct {
	Architecture string // as the source spells it ("amd64/generic", "x86_64")
	CPUCores     int    // logical CPUs; 0 when not known
	MemoryMiB    int    // 0 when not known
	Disks        []Disk
	NICs         []NIC
}

// Empty reports whether nothing was inventoried: no CPUs, no memory, no disks (a MAAS
// machine that was never commissioned).
func (i Inventory) Empty() bool {
	return i.CPUCores == 0 && i.MemoryMiB == 0 && len(i.Disks) == 0
}

// Outcome is how one aspect of a profile compares with an inventory.
type Outcome int

const (
	Met     Outcome = iota
	Unknown         // the inventory cannot prove it either way (for example a NIC's speed)
	Unmet
)

// Finding is one aspect of the comparison: what the profile wants and what the source has.
type Finding struct {
	Aspect  string // architecture, cpu, memory, disks, nics
	Wants   string
	Has     string
	Outcome Outcome
}

// Comparison is a profile compared with one inventory.
type Comparison struct {
	Profile  string
	Findings []Finding
}

// Outcome is the worst outcome of the findings.
func (c Comparison) Outcome() Outcome {
	worst := Met
	for _, f := range c.Findings {
		worst = max(worst, f.Outcome)
	}
	return worst
}

// Describe says in one line how the inventory that source reports compares with the
// profile: every aspect that is not met with both values, or what was met.
func (c Comparison) Describe(source string) string {
	var off []string
	for _, f := range c.Findings {
		if f.Outcome != Met {
			off = append(off, fmt.Sprintf("wants %s, %s reports %s", f.Wants, source, f.Has))
		}
	}
	if len(off) > 0 {
		return fmt.Sprintf("profile %q %s", c.Profile, strings.Join(off, "; "))
	}
	has := make([]string, len(c.Findings))
	for i, f := range c.Findings {
		has[i] = f.Has
	}
	return fmt.Sprintf("%s reports what profile %q wants: %s", source, c.Profile, strings.Join(has, "; "))
}

// Compare compares a profile with an inventory. Only what the profile asks for is
// compared (a zero minimum asks nothing); the architecture always is.
func Compare(p Profile, inv Inventory) Comparison {
	c := Comparison{Profile: p.Name}
	c.Findings = append(c.Findings, architecture(p, inv))
	if p.MinCPUCores > 0 {
		f := Finding{Aspect: "cpu", Wants: fmt.Sprintf("at least %d CPU cores", p.MinCPUCores), Has: fmt.Sprintf("%d CPU cores", inv.CPUCores)}
		switch {
		case inv.CPUCores == 0:
			f.Outcome, f.Has = Unknown, "no CPU count"
		case inv.CPUCores < p.MinCPUCores:
			f.Outcome = Unmet
		}
		c.Findings = append(c.Findings, f)
	}
	if p.MinMemoryMiB > 0 {
		f := Finding{Aspect: "memory", Wants: "at least " + mib(p.MinMemoryMiB) + " of memory", Has: mib(inv.MemoryMiB) + " of memory"}
		switch {
		case inv.MemoryMiB == 0:
			f.Outcome, f.Has = Unknown, "no memory size"
		case inv.MemoryMiB < p.MinMemoryMiB:
			f.Outcome = Unmet
		}
		c.Findings = append(c.Findings, f)
	}
	if p.MinDisks > 0 {
		c.Findings = append(c.Findings, disks(p, inv))
	}
	if p.MinNICs > 0 {
		c.Findings = append(c.Findings, nics(p, inv))
	}
	return c
}

func architecture(p Profile, inv Inventory) Finding {
	f := Finding{Aspect: "architecture", Wants: p.Architecture}
	got, ok := NormalizeArchitecture(inv.Architecture)
	switch {
	case strings.TrimSpace(inv.Architecture) == "":
		f.Outcome, f.Has = Unknown, "no architecture"
	case !ok:
		f.Outcome, f.Has = Unmet, fmt.Sprintf("the unfamiliar architecture %q", quoteShort(inv.Architecture))
	case got != p.Architecture:
		f.Outcome, f.Has = Unmet, got
	default:
		f.Has = got
	}
	return f
}

func disksWanted(p Profile) string {
	if p.MinDiskSizeGB == 0 {
		return fmt.Sprintf("at least %s", plural(p.MinDisks, "disk"))
	}
	return fmt.Sprintf("at least %s of at least %d GB", plural(p.MinDisks, "disk"), p.MinDiskSizeGB)
}

func disks(p Profile, inv Inventory) Finding {
	f := Finding{Aspect: "disks", Wants: disksWanted(p)}
	n := 0
	listed := make([]string, 0, len(inv.Disks))
	for _, d := range inv.Disks {
		if d.SizeBytes >= int64(p.MinDiskSizeGB)*1e9 {
			n++
		}
		listed = append(listed, d.Name+" "+gb(d.SizeBytes))
	}
	what := plural(n, "disk")
	if p.MinDiskSizeGB > 0 {
		what += fmt.Sprintf(" of at least %d GB", p.MinDiskSizeGB)
	}
	f.Has = what + listing(listed)
	if n < p.MinDisks {
		f.Outcome = Unmet
	}
	return f
}

func nicsWanted(p Profile) string {
	if p.MinNICSpeedMbps == 0 {
		return fmt.Sprintf("at least %s", plural(p.MinNICs, "NIC"))
	}
	return fmt.Sprintf("at least %s of at least %d Mbit/s", plural(p.MinNICs, "NIC"), p.MinNICSpeedMbps)
}

// nics counts the ports that reach the speed. A port whose speed is not known proves
// nothing about speed: when only such ports could make up the number, the outcome is
// Unknown, not Unmet.
func nics(p Profile, inv Inventory) Finding {
	f := Finding{Aspect: "nics", Wants: nicsWanted(p)}
	fast, unknown := 0, 0
	listed := make([]string, 0, len(inv.NICs))
	for _, n := range inv.NICs {
		switch {
		case n.SpeedMbps == 0:
			unknown++
			listed = append(listed, n.Name+" speed unknown")
		case n.SpeedMbps >= p.MinNICSpeedMbps:
			fast++
			listed = append(listed, fmt.Sprintf("%s %d Mbit/s", n.Name, n.SpeedMbps))
		default:
			listed = append(listed, fmt.Sprintf("%s %d Mbit/s", n.Name, n.SpeedMbps))
		}
	}
	if p.MinNICSpeedMbps == 0 {
		f.Has = plural(len(inv.NICs), "NIC") + listing(listed)
		if len(inv.NICs) < p.MinNICs {
			f.Outcome = Unmet
		}
		return f
	}
	f.Has = fmt.Sprintf("%s of at least %d Mbit/s", plural(fast, "NIC"), p.MinNICSpeedMbps)
	if unknown > 0 {
		f.Has += fmt.Sprintf(" and %d of unknown speed", unknown)
	}
	f.Has += listing(listed)
	switch {
	case fast >= p.MinNICs:
	case fast+unknown >= p.MinNICs:
		f.Outcome = Unknown
	default:
		f.Outcome = Unmet
	}
	return f
}

// listing puts up to eight items in parentheses, so a message stays short.
func listing(items []string) string {
	if len(items) == 0 {
		return ""
	}
	if len(items) > 8 {
		items = append(items[:8:8], fmt.Sprintf("%d more", len(items)-8))
	}
	return " (" + strings.Join(items, ", ") + ")"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// mib prints memory in MiB, with GiB beside it when that is a whole number.
func mib(v int) string {
	if v > 0 && v%1024 == 0 {
		return fmt.Sprintf("%d MiB (%d GiB)", v, v/1024)
	}
	return fmt.Sprintf("%d MiB", v)
}

// gb prints a disk size in decimal gigabytes, rounded down, as disks are sold.
func gb(bytes int64) string {
	if bytes < 10e9 {
		return fmt.Sprintf("%.1f GB", float64(bytes/1e8)/10)
	}
	return fmt.Sprintf("%d GB", bytes/1e9)
}
