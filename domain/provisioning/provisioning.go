// Package provisioning holds the rules for what Apelora asks of MAAS: commission, install
// an operating system (with the enrolment script and a fresh join token in the cloud-init
// user data), run hardware tests, and release. Apelora changes nothing else in MAAS: no
// images, zones, pools, tags or notes.
package provisioning

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/apelora/fabric/internal/apperr"
)

// Status is MAAS's machine status (NODE_STATUS).
type Status int

// The statuses the rules name. The numbers are MAAS's.
const (
	New                 Status = 0
	Commissioning       Status = 1
	FailedCommissioning Status = 2
	Ready               Status = 4
	Deployed            Status = 6
	Broken              Status = 8
	Deploying           Status = 9
	Allocated           Status = 10
	Testing             Status = 21
	FailedTesting       Status = 22
)

// MAASMachine is a machine as MAAS reports it, without any credential field.
type MAASMachine struct {
	SystemID          string
	Hostname          string
	FQDN              string
	Status            Status
	StatusName        string
	StatusMessage     string
	PowerState        string
	PowerType         string
	HardwareUUID      string
	Architecture      string
	CPUCount          int
	MemoryMiB         int
	StorageMB         float64
	OSystem           string
	DistroSeries      string
	Owner             string
	Zone              string
	Pool              string
	Tags              []string
	IPAddresses       []string
	Locked            bool
	TestingStatus     int
	TestingStatusName string
}

// CommissionOptions are what an administrator may choose when commissioning.
type CommissionOptions struct {
	// Tests are the testing scripts or tags to run after commissioning: nil means MAAS's
	// default (tag "commissioning"), an empty list means none.
	Tests []string
}

// UserData is the cloud-init user data of a deploy: the bytes sent (they hold the join
// token: never stored, logged or audited) and how a plan shows them (Shown: what the
// administrator approves, with no token, expiry or clock in it).
type UserData struct {
	Bytes []byte
	Shown string
}

// MAAS is what provisioning asks of MAAS.
type MAAS interface {
	Machines(ctx context.Context) ([]MAASMachine, error)
	Machine(ctx context.Context, systemID string) (MAASMachine, error)
	Commission(ctx context.Context, systemID string, o CommissionOptions) (MAASMachine, error)
	Test(ctx context.Context, systemID string, tests []string) (MAASMachine, error)
	Allocate(ctx context.Context, systemID string) (MAASMachine, error)
	Deploy(ctx context.Context, systemID, series string, userData UserData) (MAASMachine, error)
	Release(ctx context.Context, systemID string, erase bool, comment string) (MAASMachine, error)
	// EraseOnRelease reads MAAS's enable_disk_erasing_on_release setting.
	EraseOnRelease(ctx context.Context) (bool, error)
}

// MaxTests is how many test names or tags one request may name.
const MaxTests = 16

var testNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,99}$`)

// ValidateTests checks a list of MAAS testing script names or tags.
func ValidateTests(field string, tests []string) error {
	if len(tests) > MaxTests {
		return invalid(field, "%d test names or tags given; at most %d per request", len(tests), MaxTests)
	}
	for _, t := range tests {
		if !testNamePattern.MatchString(t) {
			return invalid(field, "%s is not a MAAS test name or tag (lower-case letters, digits, '.', '_', '-')", apperr.Quote(t))
		}
	}
	if i := firstDuplicate(tests); i >= 0 {
		return invalid(field, "%s is named twice", apperr.Quote(tests[i]))
	}
	return nil
}

func firstDuplicate(s []string) int {
	for i := range s {
		if slices.Contains(s[:i], s[i]) {
			return i
		}
	}
	return -1
}

var seriesPattern = regexp.MustCompile(`^([a-z]{1,30}/)?[a-z0-9.]{2,30}$`)

// ValidateSeries checks an OS series name as MAAS takes it (noble, ubuntu/noble, 24.04).
func ValidateSeries(series string) error {
	if !seriesPattern.MatchString(series) {
		return invalid("series", "%s is not a series name: give one such as noble, jammy or ubuntu/noble (its image must already be synced in MAAS)", apperr.Quote(series))
	}
	return nil
}

// commissionable are the statuses MAAS commissions from.
var commissionable = []Status{New, FailedCommissioning, Ready, Broken}

// testable are the statuses Apelora runs hardware tests from. MAAS also tests Allocated
// and Deployed machines, but that disturbs a machine in use: Apelora refuses.
var testable = []Status{Ready, Broken, FailedTesting}

func describe(m MAASMachine) string {
	return fmt.Sprintf("MAAS machine %s (%s) is %s", m.SystemID, m.Hostname, m.StatusName)
}

func sameHostname(a, b string) bool {
	return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}
