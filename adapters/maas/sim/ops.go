package sim

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Permission helpers follow MAAS's defaults without RBAC: users see
// unowned machines and their own; edit needs ownership or admin.
func canView(m *machine, u *userKey) bool {
	return u.Admin || m.owner == "" || m.owner == u.Username
}

func canEdit(m *machine, u *userKey) bool {
	return u.Admin || (m.owner != "" && m.owner == u.Username)
}

// last returns the last value of a parameter: MAAS forms read fields with
// QueryDict.get, which keeps only the last of repeated keys.
func last(p url.Values, k string) (string, bool) {
	vs, ok := p[k]
	if !ok || len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// boolParam accepts what MAAS's forms accept: 1/0/true/false (any case).
func boolParam(p url.Values, k string) (bool, *apiError) {
	v, ok := last(p, k)
	if !ok || v == "" {
		return false, nil
	}
	switch strings.ToLower(v) {
	case "1", "true", "on", "yes":
		return true, nil
	case "0", "false", "off", "no":
		return false, nil
	}
	return false, formError(k, fmt.Sprintf("'%s' is not a valid boolean value.", v))
}

func (s *Server) readMachine(m *machine, _ url.Values, u *userKey) (any, *apiError) {
	if !canView(m, u) {
		return nil, errForbidden
	}
	return s.render(m), nil
}

func (s *Server) queryPowerState(m *machine, _ url.Values, u *userKey) (any, *apiError) {
	if !canView(m, u) {
		return nil, errForbidden
	}
	switch {
	case m.powerType == "":
		return nil, &apiError{status: http.StatusServiceUnavailable, contentType: "text/plain; charset=utf-8",
			body: "Unconfigured power type. Please configure the power type and try again."}
	case !m.hasController():
		// Observed on a real lab machine with manual power: 400.
		m.powerState = "unknown"
		return nil, textError(http.StatusBadRequest, "Power state is not queryable")
	}
	return map[string]string{"state": m.powerState}, nil
}

// powerParameters holds BMC credentials: admin only, as in MAAS.
func (s *Server) powerParameters(m *machine, _ url.Values, u *userKey) (any, *apiError) {
	if !u.Admin {
		return nil, errForbidden
	}
	return copyMap(m.powerParameters), nil
}

func (s *Server) allPowerParameters(p url.Values, u *userKey) (any, *apiError) {
	if !u.Admin {
		return nil, errForbidden
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[string]string{}
	for _, m := range s.machines {
		if ids := p["id"]; len(ids) > 0 && !slices.Contains(ids, m.systemID) {
			continue
		}
		out[m.systemID] = copyMap(m.powerParameters)
	}
	return out, nil
}

var (
	commissionable = []int{StatusNew, StatusFailedCommissioning, StatusReady, StatusBroken}
	testable       = []int{StatusNew, StatusReady, StatusReserved, StatusAllocated, StatusDeployed, StatusMissing, StatusRetired, StatusBroken, StatusRescueMode,
		StatusFailedCommissioning, StatusFailedDeployment, StatusFailedReleasing, StatusFailedDiskErasing,
		StatusFailedEnteringRescueMode, StatusFailedExitingRescueMode, StatusFailedTesting}
	releasable = []int{StatusAllocated, StatusReserved, StatusBroken, StatusDeploying, StatusDeployed, StatusFailedDeployment, StatusFailedDiskErasing, StatusFailedReleasing}
	abortable  = []int{StatusCommissioning, StatusDiskErasing, StatusDeploying, StatusTesting}
	// After tests pass from these, MAAS returns the machine to Ready.
	testReturnsReady = []int{StatusBroken, StatusFailedDeployment, StatusFailedReleasing, StatusFailedDiskErasing,
		StatusFailedEnteringRescueMode, StatusFailedExitingRescueMode, StatusFailedTesting}
)

func errUnconfiguredPower() *apiError {
	// MAAS raises UnknownPowerType, which no handler maps: a 500.
	return textError(http.StatusInternalServerError, "Unconfigured power type. Please configure the power type and try again.")
}

func (s *Server) commission(m *machine, p url.Values, u *userKey) (any, *apiError) {
	if !u.Admin || m.locked {
		return nil, errForbidden
	}
	if !slices.Contains(commissionable, m.status) {
		return nil, formError("__all__", "Commission is not available because of the current state of the node.")
	}
	var flags [4]bool
	for i, k := range []string{"enable_ssh", "skip_bmc_config", "skip_networking", "skip_storage"} {
		v, err := boolParam(p, k)
		if err != nil {
			return nil, err
		}
		flags[i] = v
	}
	tests, aerr := s.testsFor(p, true)
	if aerr != nil {
		return nil, aerr
	}
	if m.powerType == "" {
		return nil, errUnconfiguredPower()
	}
	m.cancelTimer()
	m.prevStatus = m.status
	m.status = StatusCommissioning
	m.statusMessage = "Commissioning"
	m.enableSSH = flags[0]
	m.commissioning = []scriptResult{{name: "00-maas-01-commissioning", hwType: hwNode}}
	m.commissioning[0].set(ScriptRunning, s.clock.Now())
	m.testing = resultsFor(tests, ScriptPending)
	m.powerOnNow()
	s.schedule(m, s.durations.Commissioning, func() { s.finishCommissioning(m, tests) })
	return s.render(m), nil
}

func (s *Server) finishCommissioning(m *machine, tests []script) {
	if m.failCommissioning {
		m.status = StatusFailedCommissioning
		m.statusMessage = "Failed commissioning - a commissioning script failed"
		m.commissioning[0].set(ScriptFailed, s.clock.Now())
		setAll(m.testing, ScriptAborted, s.clock.Now())
		m.setPower("off")
		return
	}
	m.hwKnown = true
	m.commissioning[0].set(ScriptPassed, s.clock.Now())
	if len(tests) == 0 {
		s.endOfRun(m, StatusReady)
		return
	}
	m.status = StatusTesting
	m.statusMessage = "Testing"
	setAll(m.testing, ScriptRunning, s.clock.Now())
	s.schedule(m, s.durations.Testing, func() { s.finishTests(m, StatusReady) })
}

// testsFor resolves testing_scripts. Omitted means MAAS's default tag
// "commissioning"; "none" is accepted by commission only.
func (s *Server) testsFor(p url.Values, commissioning bool) ([]script, *apiError) {
	v, ok := last(p, "testing_scripts")
	if !ok || strings.TrimSpace(v) == "" {
		v = "commissioning"
	}
	sel, none, bad := selectTests(v)
	if bad != "" {
		return nil, formError("testing_scripts", fmt.Sprintf("Select a valid choice. %s is not one of the available choices.", bad))
	}
	if none && !commissioning {
		return nil, textError(http.StatusBadRequest, "No testing scripts found!")
	}
	return sel, nil
}

func resultsFor(tests []script, status int) []scriptResult {
	out := make([]scriptResult, len(tests))
	for i, t := range tests {
		out[i] = scriptResult{name: t.name, hwType: t.hwType, status: status}
	}
	return out
}

func (s *Server) test(m *machine, p url.Values, u *userKey) (any, *apiError) {
	if !u.Admin || m.locked {
		return nil, errForbidden
	}
	if m.status == StatusNew && !m.hwKnown {
		return nil, textError(http.StatusBadRequest, "Unable to start machine testing; this node has never been commissioned. "+
			"Please use the 'Commission' action to commission & test this machine.")
	}
	if !slices.Contains(testable, m.status) {
		return nil, formError("__all__", "Test is not available because of the current state of the node.")
	}
	enableSSH, aerr := boolParam(p, "enable_ssh")
	if aerr != nil {
		return nil, aerr
	}
	tests, aerr := s.testsFor(p, false)
	if aerr != nil {
		return nil, aerr
	}
	if len(tests) == 0 {
		return nil, textError(http.StatusBadRequest, "No testing scripts found!")
	}
	if m.status == StatusDeployed && slices.ContainsFunc(tests, func(t script) bool { return t.destructive }) {
		return nil, formError("testing_scripts", "Destructive tests may only be run on undeployed machines.")
	}
	if m.powerType == "" {
		return nil, errUnconfiguredPower()
	}
	m.cancelTimer()
	from := m.status
	m.prevStatus = from
	m.status = StatusTesting
	m.statusMessage = "Testing"
	// A machine that was running (Deployed, say) stays on afterwards.
	m.enableSSH = enableSSH || m.powerState == "on"
	m.testing = resultsFor(tests, ScriptPending)
	setAll(m.testing, ScriptRunning, s.clock.Now())
	returnTo := from
	if slices.Contains(testReturnsReady, from) {
		returnTo = StatusReady
	}
	m.powerOnNow()
	s.schedule(m, s.durations.Testing, func() { s.finishTests(m, returnTo) })
	return s.render(m), nil
}

// finishTests applies each script's configured outcome.
func (s *Server) finishTests(m *machine, passTo int) {
	var failed []string
	for i := range m.testing {
		st, ok := m.testOutcomes[m.testing[i].name]
		if !ok {
			st = ScriptPassed
		}
		m.testing[i].set(st, s.clock.Now())
		if st == ScriptFailed || st == ScriptTimedOut {
			failed = append(failed, m.testing[i].name)
		}
	}
	if len(failed) > 0 {
		m.status = StatusFailedTesting
		m.statusMessage = "Failed testing - " + strings.Join(failed, ", ") + " failed"
		if !m.enableSSH {
			m.setPower("off")
		}
		return
	}
	s.endOfRun(m, passTo)
}

// endOfRun ends commissioning or testing: back to a status, power off unless
// the operator asked to keep SSH access.
func (s *Server) endOfRun(m *machine, to int) {
	m.status = to
	m.statusMessage = ""
	if !m.enableSSH {
		m.setPower("off")
	}
}

var seriesVersions = map[string]string{"focal": "20.04", "jammy": "22.04", "noble": "24.04"}

// syncedSeries are the Ubuntu series whose images MAAS holds: config synced_series
// (a list of names), jammy and noble by default. Deploys and boot-resources/ read it. The
// caller holds s.mu.
func (s *Server) syncedSeries() []string {
	synced := []string{"jammy", "noble"}
	if cfg, ok := s.config["synced_series"].([]any); ok {
		synced = synced[:0]
		for _, x := range cfg {
			if str, ok := x.(string); ok {
				synced = append(synced, str)
			}
		}
	}
	return synced
}

// normalizeSeries accepts jammy, 22.04, ubuntu/jammy and ubuntu/22.04.
func (s *Server) normalizeSeries(v string) (string, bool) {
	synced := s.syncedSeries()
	name := strings.TrimPrefix(v, "ubuntu/")
	for series, version := range seriesVersions {
		if name == version {
			name = series
		}
	}
	return name, slices.Contains(synced, name)
}

func (s *Server) deploy(m *machine, p url.Values, u *userKey) (any, *apiError) {
	series, _ := last(p, "distro_series")
	if series == "" {
		series, _ = s.config["default_distro_series"].(string)
	}
	name, ok := s.normalizeSeries(series)
	if !ok {
		choices := []string{"''"}
		for _, x := range s.syncedSeries() {
			choices = append(choices, "'ubuntu/"+x+"'")
		}
		return nil, formError("distro_series", fmt.Sprintf("'%s' is not a valid distro_series.  It should be one of: %s.", series, strings.Join(choices, ", ")))
	}
	var userData []byte
	if v, ok := last(p, "user_data"); ok && v != "" {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, textError(http.StatusBadRequest, "Invalid user_data: it must be base64-encoded.")
		}
		userData = b
	}
	if m.locked {
		return nil, errForbidden
	}
	if m.status == StatusReady && m.owner == "" {
		if !canView(m, u) {
			return nil, errForbidden
		}
		m.owner, m.status = u.Username, StatusAllocated // deploy allocates a StatusReady machine first
	}
	if m.owner != "" && m.owner != u.Username {
		return nil, textError(http.StatusConflict, "Can't allocate a machine belonging to another user.")
	}
	if m.status != StatusAllocated {
		return nil, textError(http.StatusConflict, fmt.Sprintf("Can't deploy a machine that is in the '%s' state", StatusLabel(m.status)))
	}
	if agent, ok := last(p, "agent_name"); ok {
		m.agentName = agent
	}
	s.startDeploy(m, name, userData)
	return s.render(m), nil
}

func (s *Server) startDeploy(m *machine, series string, userData []byte) {
	m.cancelTimer()
	m.status = StatusDeploying
	m.statusMessage = "Deploying"
	m.osystem, m.distroSeries = "ubuntu", series
	m.userData = userData
	m.powerOnNow()
	s.schedule(m, s.durations.Deploying, func() {
		if m.failDeployment {
			m.status = StatusFailedDeployment
			m.statusMessage = "Failed deployment - Installation failed"
			return
		}
		m.status = StatusDeployed
		m.statusMessage = "Deployed"
		m.pendingBoot = true
	})
}

func (s *Server) release(m *machine, p url.Values, u *userKey) (any, *apiError) {
	if !canEdit(m, u) || m.locked {
		return nil, errForbidden
	}
	if m.status == StatusReady || m.status == StatusReleasing {
		return s.render(m), nil // MAAS treats these as a no-op
	}
	if !slices.Contains(releasable, m.status) {
		return nil, textError(http.StatusConflict, fmt.Sprintf("Machine cannot be released in its current state ('%s').", StatusLabel(m.status)))
	}
	var rec ReleaseRecord
	var aerr *apiError
	if rec.Erase, aerr = boolParam(p, "erase"); aerr != nil {
		return nil, aerr
	}
	if rec.SecureErase, aerr = boolParam(p, "secure_erase"); aerr != nil {
		return nil, aerr
	}
	if rec.QuickErase, aerr = boolParam(p, "quick_erase"); aerr != nil {
		return nil, aerr
	}
	rec.ConfigForced, _ = s.config["enable_disk_erasing_on_release"].(bool)
	rec.Requested = true
	m.lastRelease = rec
	erase := rec.Erase || rec.SecureErase || rec.QuickErase || rec.ConfigForced

	m.cancelTimer()
	if erase {
		// Disk erasing boots the machine into an ephemeral environment.
		m.status = StatusDiskErasing
		m.statusMessage = "Disk erasing"
		m.powerOnNow()
		s.schedule(m, s.durations.DiskErasing, func() {
			if m.failRelease {
				m.status = StatusFailedDiskErasing
				m.statusMessage = "Failed disk erasing - wipe-disks failed"
				m.setPower("off")
				return
			}
			s.releaseDone(m)
		})
	} else {
		m.status = StatusReleasing
		m.statusMessage = "Releasing"
		s.powerOffLater(m)
		s.schedule(m, s.durations.Releasing, func() {
			if m.failRelease {
				m.status = StatusFailedReleasing
				m.statusMessage = "Releasing failed"
				return
			}
			s.releaseDone(m)
		})
	}
	return s.render(m), nil
}

func (s *Server) releaseDone(m *machine) {
	m.status = StatusReady
	m.statusMessage = ""
	m.owner, m.agentName = "", ""
	m.osystem, m.distroSeries = "", ""
	m.userData = nil
	clear(m.annotations)
	if m.hasController() && !m.powerOffIneffective {
		m.setPower("off")
	}
}

func (s *Server) abort(m *machine, p url.Values, u *userKey) (any, *apiError) {
	if !canEdit(m, u) {
		return nil, errForbidden
	}
	if !slices.Contains(abortable, m.status) {
		return nil, textError(http.StatusConflict, fmt.Sprintf("Cannot abort in current state: node %s is in state %s.", m.systemID, StatusLabel(m.status)))
	}
	m.cancelTimer()
	switch m.status {
	case StatusCommissioning:
		setAll(m.commissioning, ScriptAborted, s.clock.Now())
		setAll(m.testing, ScriptAborted, s.clock.Now())
		m.status = m.prevStatus
	case StatusTesting:
		for i := range m.testing {
			if m.testing[i].status == ScriptRunning || m.testing[i].status == ScriptPending {
				m.testing[i].set(ScriptAborted, s.clock.Now())
			}
		}
		m.status = m.prevStatus
	case StatusDeploying:
		m.status = StatusAllocated
	case StatusDiskErasing:
		m.status = StatusFailedDiskErasing
	}
	m.statusMessage = "Aborted"
	s.powerOffLater(m)
	return s.render(m), nil
}

func (s *Server) powerOff(m *machine, p url.Values, u *userKey) (any, *apiError) {
	if !canEdit(m, u) || m.locked {
		return nil, errForbidden
	}
	if m.powerType == "" {
		return nil, nil // MAAS answers null when it cannot stop the machine
	}
	m.powerOffRequests++
	// Manual power: MAAS "sends" the action to a driver that does nothing.
	s.powerOffLater(m)
	return s.render(m), nil
}

func (s *Server) powerOn(m *machine, p url.Values, u *userKey) (any, *apiError) {
	if m.owner == "" {
		return nil, textError(http.StatusConflict, "Can't start node: it hasn't been allocated.")
	}
	if !canEdit(m, u) || m.locked {
		return nil, errForbidden
	}
	var userData []byte
	if v, ok := last(p, "user_data"); ok && v != "" {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, textError(http.StatusBadRequest, "Invalid user_data: it must be base64-encoded.")
		}
		userData = b
	}
	if m.status == StatusAllocated {
		series, _ := s.config["default_distro_series"].(string)
		s.startDeploy(m, series, userData) // power_on of an StatusAllocated machine deploys it
	} else {
		m.powerOnNow()
	}
	return s.render(m), nil
}

var macRE = regexp.MustCompile(`^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$`)

func (s *Server) listMachines(p url.Values, u *userKey) (any, *apiError) {
	var statuses, notStatuses []int
	for _, pair := range []struct {
		key string
		dst *[]int
	}{{"status", &statuses}, {"not_status", &notStatuses}} {
		for _, v := range p[pair.key] {
			st, ok := statusFromFilter(v)
			if !ok {
				return nil, formError(pair.key, fmt.Sprintf("Select a valid choice. %s is not one of the available choices.", v))
			}
			*pair.dst = append(*pair.dst, st)
		}
	}
	for _, mac := range p["mac_address"] {
		if !macRE.MatchString(mac) {
			return nil, textError(http.StatusBadRequest, "Invalid parameter: invalid MAC address format")
		}
	}
	in := func(k, v string) bool { vs := p[k]; return len(vs) == 0 || slices.Contains(vs, v) }
	notIn := func(k, v string) bool { return !slices.Contains(p[k], v) }

	s.mu.Lock()
	defer s.mu.Unlock()
	out := []machineJSON{}
	for _, m := range s.machinesSorted() {
		if !canView(m, u) ||
			!in("id", m.systemID) || !notIn("not_id", m.systemID) ||
			!in("hostname", m.hostname) || !notIn("not_hostname", m.hostname) ||
			!in("domain", m.domain) || !in("agent_name", m.agentName) ||
			!in("zone", m.zone) || !in("pool", m.pool) || !in("arch", m.architecture) ||
			len(p["mac_address"]) > 0 || // simulated machines have no interfaces
			(len(statuses) > 0 && !slices.Contains(statuses, m.status)) ||
			slices.Contains(notStatuses, m.status) {
			continue
		}
		if !hasAllTags(m.tags, p["tags"]) {
			continue
		}
		out = append(out, s.render(m))
	}
	return out, nil
}

func hasAllTags(have, want []string) bool {
	for _, w := range want {
		for _, t := range strings.Split(w, ",") {
			if t = strings.TrimSpace(t); t != "" && !slices.Contains(have, t) {
				return false
			}
		}
	}
	return true
}

func (s *Server) allocate(p url.Values, u *userKey) (any, *apiError) {
	var constraints []string // for the error text, in MAAS's repr style
	addC := func(k string) {
		if vs, ok := p[k]; ok {
			constraints = append(constraints, fmt.Sprintf("('%s', ['%s'])", k, strings.Join(vs, "', '")))
		}
	}
	for _, k := range []string{"name", "arch", "cpu_count", "mem", "tags", "not_tags", "zone", "pool"} {
		addC(k)
	}
	minCPU, minMem := 0.0, 0.0
	for k, dst := range map[string]*float64{"cpu_count": &minCPU, "mem": &minMem} {
		if v, ok := last(p, k); ok && v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, formError(k, fmt.Sprintf("Invalid number: %s", v))
			}
			*dst = f
		}
	}
	dryRun, aerr := boolParam(p, "dry_run")
	if aerr != nil {
		return nil, aerr
	}
	systemID, _ := last(p, "system_id")
	name, _ := last(p, "name")

	s.mu.Lock()
	defer s.mu.Unlock()
	var best *machine
	bestCost := 0.0
	for _, m := range s.machinesSorted() {
		if m.status != StatusReady || m.locked || !canView(m, u) {
			continue
		}
		if systemID != "" && m.systemID != systemID {
			continue
		}
		if name != "" && name != m.hostname && name != m.hostname+"."+m.domain {
			continue
		}
		cpu, mem := 0, 0
		if m.hwKnown {
			cpu, mem = m.cpuCount, m.memory
		}
		if float64(cpu) < minCPU || float64(mem) < minMem {
			continue
		}
		if !in1(p, "zone", m.zone) || !in1(p, "pool", m.pool) || !in1(p, "arch", m.architecture) ||
			!hasAllTags(m.tags, p["tags"]) || anyTag(m.tags, p["not_tags"]) {
			continue
		}
		cost := float64(cpu) + float64(mem)/1024
		if best == nil || cost < bestCost {
			best, bestCost = m, cost
		}
	}
	if best == nil {
		switch {
		case systemID != "":
			return nil, textError(http.StatusConflict, fmt.Sprintf("No machine with system ID %s available.", systemID))
		case len(constraints) == 0:
			return nil, textError(http.StatusConflict, "No machine available.")
		default:
			var resolved []string
			for _, k := range sortedKeys(p) {
				if k != "comment" && k != "agent_name" && k != "dry_run" && k != "verbose" {
					resolved = append(resolved, k+"="+strings.Join(p[k], ","))
				}
			}
			return nil, textError(http.StatusConflict, fmt.Sprintf("No available machine matches constraints: [%s] (resolved to \"%s\")",
				strings.Join(constraints, ", "), strings.Join(resolved, " ")))
		}
	}
	if !dryRun {
		best.owner = u.Username
		best.status = StatusAllocated
		best.agentName, _ = last(p, "agent_name")
	}
	j := s.render(best)
	cbt := map[string]any{}
	j.ConstraintsByType = &cbt
	return j, nil
}

func in1(p url.Values, k, v string) bool {
	vs := p[k]
	return len(vs) == 0 || slices.Contains(vs, v)
}

func anyTag(have, not []string) bool {
	for _, n := range not {
		for _, t := range strings.Split(n, ",") {
			if t = strings.TrimSpace(t); t != "" && slices.Contains(have, t) {
				return true
			}
		}
	}
	return false
}

func (s *Server) getConfig(p url.Values) (any, *apiError) {
	name, _ := last(p, "name")
	if name == "" {
		return nil, textError(http.StatusBadRequest, "No provided name!")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.config[name]
	if !ok {
		return nil, formError("name", fmt.Sprintf("%s is not a valid config setting.", name))
	}
	return v, nil
}

func (s *Server) setConfig(p url.Values, u *userKey) (any, *apiError) {
	if !u.Admin {
		return nil, errForbidden
	}
	name, _ := last(p, "name")
	value, _ := last(p, "value")
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.config[name]
	if !ok {
		return nil, formError("name", fmt.Sprintf("%s is not a valid config setting.", name))
	}
	if _, isBool := old.(bool); isBool {
		b, aerr := boolParam(url.Values{"value": {value}}, "value")
		if aerr != nil {
			return nil, aerr
		}
		s.config[name] = b
	} else {
		s.config[name] = value
	}
	return s.config[name], nil
}
