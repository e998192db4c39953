// Package hardware is the declared hardware profile: what administrators say a class of
// machine must have (architecture, CPU cores, memory, disks, NICs), the rules for
// declaring one, and the comparison of a profile with an inventory, as MAAS took it at
// commissioning or as Incus sees the member now. Admission runs the comparison; nothing
// here talks to a network.
package hardware

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apelora/fabric/domain/machines"
	"github.com/apelora/fabric/internal/apperr"
)

// Profile is a declared hardware profile. A zero minimum asks nothing of that aspect;
// the architecture is always compared.
type Profile struct {
	Name         string
	Description  string
	Architecture string // a kernel name, as Incus reports it: x86_64, aarch64 …
	MinCPUCores  int    // logical CPUs (hardware threads), as MAAS's cpu_count counts them
	MinMemoryMiB int
	// MinDisks disks of at least MinDiskSizeGB decimal gigabytes each (10^9 bytes, as
	// disks are sold).
	MinDisks      int
	MinDiskSizeGB int
	// MinNICs network ports of at least MinNICSpeedMbps each (0: any speed).
	MinNICs         int
	MinNICSpeedMbps int
	SetBy           string
	SetAt           time.Time
	// Machines are the machine records the profile is assigned to, by name (filled by reads).
	Machines []string
}

// Limits: anything above is a typing slip, not a machine (Linux supports at most 16384
// CPUs; 64 TiB of memory and 1 PB disks are beyond any server sold today).
const (
	MaxCPUCores     = 16384
	MaxMemoryMiB    = 64 << 20 // 64 TiB
	MaxDisks        = 256
	MaxDiskSizeGB   = 1_000_000 // 1 PB
	MaxNICs         = 64
	MaxNICSpeedMbps = 1_600_000 // 1.6 Tbit/s
	maxDescription  = 1024
)

// ValidateName checks a profile name; field is the input field that carries it. Profile
// names take the shape of machine names (machines.NameRule, one rule), which is also
// hardware_profiles' CHECK.
func ValidateName(field, name string) error {
	return machines.ValidateLabel(field, "hardware profile name", name)
}

// architectures maps every accepted spelling to the kernel's name, which Incus reports.
// MAAS and Debian name the same architectures differently (amd64, arm64, ppc64el …).
var architectures = map[string]string{
	"x86_64": "x86_64", "amd64": "x86_64",
	"aarch64": "aarch64", "arm64": "aarch64",
	"ppc64le": "ppc64le", "ppc64el": "ppc64le",
	"s390x":   "s390x",
	"riscv64": "riscv64",
	"i686":    "i686", "i386": "i686",
	"armv7l": "armv7l", "armhf": "armv7l",
	"loongarch64": "loongarch64", "loong64": "loongarch64",
}

// ArchitectureRule lists the accepted architecture names.
var ArchitectureRule = func() string {
	var names []string
	for k, v := range architectures {
		if k == v {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ") + " (or Debian's and MAAS's names: amd64, arm64, ppc64el, i386, armhf, loong64)"
}()

// NormalizeArchitecture returns the kernel's name for an architecture written as Incus,
// Debian or MAAS write it ("amd64/generic" → "x86_64"), and whether it is known.
func NormalizeArchitecture(s string) (string, bool) {
	base, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(s)), "/")
	a, ok := architectures[base]
	return a, ok
}

// Declaration is what an administrator asks to declare.
type Declaration struct {
	Name            string
	Description     string
	Architecture    string
	MinCPUCores     int
	MinMemoryMiB    int
	MinDisks        int
	MinDiskSizeGB   int
	MinNICs         int
	MinNICSpeedMbps int
}

// Profile checks the declaration, naming the first field that is wrong, and returns the
// profile it declares (architecture in the kernel's spelling).
func (d Declaration) Profile() (Profile, error) {
	if err := ValidateName("profile", d.Name); err != nil {
		return Profile{}, err
	}
	if utf8.RuneCountInString(d.Description) > maxDescription {
		return Profile{}, apperr.Invalid("description", "the description is longer than %d characters", maxDescription)
	}
	if !utf8.ValidString(d.Description) || strings.ContainsFunc(d.Description, func(c rune) bool { return c < 0x20 && c != '\n' && c != '\t' }) {
		return Profile{}, apperr.Invalid("description", "the description contains control characters or is not UTF-8")
	}
	arch, ok := NormalizeArchitecture(d.Architecture)
	if !ok {
		return Profile{}, apperr.Invalid("architecture", "unknown architecture %q: use one of %s", quoteShort(d.Architecture), ArchitectureRule)
	}
	for _, f := range []struct {
		field, what string
		v, max      int
	}{
		{"minCpuCores", "CPU cores", d.MinCPUCores, MaxCPUCores},
		{"minMemoryMiB", "MiB of memory", d.MinMemoryMiB, MaxMemoryMiB},
		{"minDisks", "disks", d.MinDisks, MaxDisks},
		{"minDiskSizeGB", "GB per disk", d.MinDiskSizeGB, MaxDiskSizeGB},
		{"minNics", "NICs", d.MinNICs, MaxNICs},
		{"minNicSpeedMbps", "Mbit/s per NIC", d.MinNICSpeedMbps, MaxNICSpeedMbps},
	} {
		if f.v < 0 {
			return Profile{}, apperr.Invalid(f.field, "%s is %d: a minimum cannot be negative (0 asks nothing)", f.field, f.v)
		}
		if f.v > f.max {
			return Profile{}, apperr.Invalid(f.field, "%s is %d, more than %d %s: no server has that many; check the unit", f.field, f.v, f.max, f.what)
		}
	}
	if d.MinDiskSizeGB > 0 && d.MinDisks == 0 {
		return Profile{}, apperr.Invalid("minDisks", "minDiskSizeGB is set but minDisks is 0: say how many disks must have at least %d GB", d.MinDiskSizeGB)
	}
	if d.MinNICSpeedMbps > 0 && d.MinNICs == 0 {
		return Profile{}, apperr.Invalid("minNics", "minNicSpeedMbps is set but minNics is 0: say how many NICs must reach %d Mbit/s", d.MinNICSpeedMbps)
	}
	return Profile{
		Name: d.Name, Description: d.Description, Architecture: arch,
		MinCPUCores: d.MinCPUCores, MinMemoryMiB: d.MinMemoryMiB,
		MinDisks: d.MinDisks, MinDiskSizeGB: d.MinDiskSizeGB,
		MinNICs: d.MinNICs, MinNICSpeedMbps: d.MinNICSpeedMbps,
	}, nil
}

// quoteShort keeps error messages bounded: at most 64 characters of a bad value.
func quoteShort(s string) string {
	if utf8.RuneCountInString(s) <= 64 {
		return strings.ToValidUTF8(s, "?")
	}
	r := []rune(strings.ToValidUTF8(s, "?"))
	return string(r[:64]) + "…"
}

// Wants describes what the profile asks for, in one line.
// Fact is the profile as a plan reads it (its hash covers it): what it wants, its
// description and who set it when, so a profile replaced meanwhile (even with the same
// minimums) reads otherwise. "none" for no profile.
func (p *Profile) Fact() string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("%s; description %q; set by %s at %s", p.Wants(), p.Description, p.SetBy, p.SetAt.UTC().Format(time.RFC3339Nano))
}

func (p Profile) Wants() string {
	parts := []string{p.Architecture}
	if p.MinCPUCores > 0 {
		parts = append(parts, fmt.Sprintf("at least %d CPU cores", p.MinCPUCores))
	}
	if p.MinMemoryMiB > 0 {
		parts = append(parts, "at least "+mib(p.MinMemoryMiB)+" of memory")
	}
	if p.MinDisks > 0 {
		parts = append(parts, disksWanted(p))
	}
	if p.MinNICs > 0 {
		parts = append(parts, nicsWanted(p))
	}
	return strings.Join(parts, ", ")
}
