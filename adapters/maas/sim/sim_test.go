package sim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// These tests speak raw HTTP to the simulator on 127.0.0.1 to pin down the
// wire shape that the client tests cannot see.

type rig struct {
	t     *testing.T
	s     *Server
	ep    *Endpoint
	clock *FakeClock
	key   string
	n     int
}

func newRig(t *testing.T, specs ...MachineSpec) *rig {
	t.Helper()
	r := &rig{t: t, clock: NewFakeClock(time.Unix(1767312000, 0)), key: NewAPIKey()}
	var err error
	r.s, err = New(Options{
		Users:   []User{{Username: "apelora", APIKey: r.key, Admin: true}, {Username: "viewer", APIKey: "vc:vt:vs"}},
		Fixture: Fixture{Machines: specs},
		Clock:   r.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.ep, err = r.s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.ep.Close() })
	return r
}

func (r *rig) auth(key string) string {
	r.n++
	p := strings.Split(key, ":")
	return fmt.Sprintf(`OAuth oauth_consumer_key="%s", oauth_token="%s", oauth_signature="%%26%s", `+
		`oauth_signature_method="PLAINTEXT", oauth_nonce="n%d-%d", oauth_timestamp="%d", oauth_version="1.0"`,
		p[0], p[1], p[2], r.n, time.Now().UnixNano(), time.Now().Unix())
}

// do sends a signed request; body may be url.Values (urlencoded), a
// *multipart.Writer's bytes (set ct), or nil.
func (r *rig) do(method, path, ct string, body []byte, key string) (*http.Response, string) {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+r.ep.Addr+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if key != "" {
		req.Header.Set("Authorization", r.auth(key))
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (r *rig) get(path string) (*http.Response, string) { return r.do("GET", path, "", nil, r.key) }

func (r *rig) post(path string, form url.Values) (*http.Response, string) {
	return r.do("POST", path, "application/x-www-form-urlencoded", []byte(form.Encode()), r.key)
}

func machineSpec(id string, status int) MachineSpec {
	return MachineSpec{SystemID: id, Hostname: "h-" + id, Status: status, PowerType: "ipmi",
		HardwareUUID: "uuid-" + id, CPUCount: 4, Memory: 8192, StorageBytes: 1e12}
}

// gomaasapi (machine_2_0) fails to parse a machine when a required field is
// missing or has the wrong JSON type; check each one.
func TestMachineJSONShape(t *testing.T) {
	r := newRig(t, machineSpec("k7qpwx", StatusReady))
	resp, body := r.get("/MAAS/api/2.0/machines/")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" || resp.Header.Get("X-MAAS-API-Hash") == "" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list) != 1 {
		t.Fatalf("%v %s", err, body)
	}
	m := list[0]
	type kind int
	const (
		str kind = iota
		num
		boolean
		arr
		obj
		null
		strOrNull
	)
	want := map[string]kind{
		"resource_uri": str, "system_id": str, "hostname": str, "fqdn": str, "tag_names": arr,
		"owner_data": obj, "osystem": str, "distro_series": str, "memory": num, "cpu_count": num,
		"ip_addresses": arr, "power_state": str, "status_name": str, "interface_set": arr, "zone": obj,
		"physicalblockdevice_set": arr, "blockdevice_set": arr, "hardware_info": obj, "status_message": strOrNull,
		"boot_interface": obj, "pool": obj, "architecture": str, "domain": obj, "status": num, "storage": num,
		"hardware_uuid": str, "power_type": str, "owner": null, "locked": boolean, "testing_status": num,
		"testing_status_name": str, "commissioning_status": num, "workload_annotations": obj,
		"virtualblockdevice_set": arr, "numanode_set": arr, "node_type_name": str, "default_gateways": obj,
		"status_action": null, "parent": null, "boot_disk": obj,
	}
	for k, kd := range want {
		v, ok := m[k]
		if !ok {
			t.Errorf("field %s missing", k)
			continue
		}
		good := false
		switch kd {
		case str:
			_, good = v.(string)
		case num:
			_, good = v.(float64)
		case boolean:
			_, good = v.(bool)
		case arr:
			_, good = v.([]any)
		case obj:
			_, good = v.(map[string]any)
		case null:
			good = v == nil
		case strOrNull:
			_, isStr := v.(string)
			good = isStr || v == nil
		}
		if !good {
			t.Errorf("field %s = %#v, wrong type", k, v)
		}
	}
	// What gomaasapi needs of each interface and block device.
	for _, set := range []struct {
		name   string
		fields []string
	}{
		{"interface_set", []string{"id", "name", "type", "enabled", "tags", "vlan", "links", "effective_mtu", "parents", "children", "resource_uri"}},
		{"physicalblockdevice_set", []string{"id", "name", "path", "used_for", "tags", "block_size", "used_size", "size", "uuid", "model", "id_path", "filesystem", "partitions", "resource_uri"}},
	} {
		items, _ := m[set.name].([]any)
		if len(items) == 0 {
			t.Errorf("%s is empty for a commissioned machine", set.name)
		}
		for _, it := range items {
			for _, f := range set.fields {
				if _, ok := it.(map[string]any)[f]; !ok {
					t.Errorf("%s item lacks %s", set.name, f)
				}
			}
		}
	}
	for _, k := range []string{"zone", "pool"} {
		o := m[k].(map[string]any)
		for _, f := range []string{"name", "description", "resource_uri"} {
			if _, ok := o[f].(string); !ok {
				t.Errorf("%s.%s missing", k, f)
			}
		}
	}
	if m["resource_uri"] != "/MAAS/api/2.0/machines/k7qpwx/" || m["storage"] != 1e6 || m["testing_status"] != -1.0 || m["testing_status_name"] != "Unknown" {
		t.Errorf("values: %v %v %v", m["resource_uri"], m["storage"], m["testing_status"])
	}
	for _, forbidden := range []string{"power_parameters", "power_pass", "token_secret", "user_data"} {
		if strings.Contains(body, forbidden) {
			t.Errorf("machine JSON mentions %s", forbidden)
		}
	}
}

func TestOpDispatch(t *testing.T) {
	r := newRig(t, machineSpec("k7qpwx", StatusReady), machineSpec("m2m2m2", StatusReady))
	// op from a path suffix.
	if resp, body := r.post("/MAAS/api/2.0/machines/k7qpwx/op-test", url.Values{}); resp.StatusCode != 200 || !strings.Contains(body, `"status": 21`) && !strings.Contains(body, `"status":21`) {
		t.Fatalf("op-test: %d %s", resp.StatusCode, body)
	}
	// op from the form body.
	if resp, body := r.post("/MAAS/api/2.0/machines/", url.Values{"op": {"allocate"}, "system_id": {"m2m2m2"}}); resp.StatusCode != 200 || !strings.Contains(body, `"constraints_by_type"`) {
		t.Fatalf("op in body: %d %s", resp.StatusCode, body)
	}
	// Multipart, as the MAAS CLI sends.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("comment", "cli")
	mw.Close()
	if resp, body := r.do("POST", "/MAAS/api/2.0/machines/m2m2m2/?op=release", mw.FormDataContentType(), buf.Bytes(), r.key); resp.StatusCode != 200 {
		t.Fatalf("multipart: %d %s", resp.StatusCode, body)
	}
	if got := r.s.Requests(); got[len(got)-1].Form.Get("comment") != "cli" {
		t.Fatalf("multipart form not read: %+v", got[len(got)-1])
	}
	// JSON bodies are ignored, as piston leaves request.POST empty.
	r.do("POST", "/MAAS/api/2.0/machines/k7qpwx/?op=abort", "application/json", []byte(`{"comment":"x"}`), r.key)
	if got := r.s.Requests(); len(got[len(got)-1].Form) != 0 {
		t.Fatalf("JSON body was read: %+v", got[len(got)-1])
	}
	for _, c := range []struct{ method, path, want string }{
		{"POST", "/MAAS/api/2.0/machines/k7qpwx/?op=query_power_state", "Unrecognised signature: method=POST op=query_power_state"},
		{"GET", "/MAAS/api/2.0/machines/k7qpwx/?op=deploy", "Unrecognised signature: method=GET op=deploy"},
		{"PUT", "/MAAS/api/2.0/users/", "Unrecognised signature: method=PUT op=None"},
	} {
		resp, body := r.do(c.method, c.path, "application/x-www-form-urlencoded", []byte{}, r.key)
		if resp.StatusCode != 400 || body != c.want {
			t.Errorf("%s %s: %d %q", c.method, c.path, resp.StatusCode, body)
		}
	}
	// Unknown system ID, but a valid signature: 404 text.
	if resp, body := r.get("/MAAS/api/2.0/machines/nosuch/"); resp.StatusCode != 404 || body != "No Machine matches the given query." {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	// A GET without the trailing slash is redirected.
	if resp, _ := r.get("/MAAS/api/2.0/machines/k7qpwx"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/MAAS/api/2.0/machines/k7qpwx/" {
		t.Fatalf("redirect: %d %v", resp.StatusCode, resp.Header)
	}
}

func TestPowerParametersAndUserDataStayInside(t *testing.T) {
	sp := machineSpec("k7qpwx", StatusReady)
	sp.PowerParameters = map[string]string{"power_address": "10.9.9.9", "power_user": "root", "power_pass": "calvin"}
	r := newRig(t, sp)
	if resp, body := r.do("GET", "/MAAS/api/2.0/machines/k7qpwx/?op=power_parameters", "", nil, "vc:vt:vs"); resp.StatusCode != 403 || body != "" {
		t.Fatalf("non-admin power_parameters: %d %q", resp.StatusCode, body)
	}
	if resp, body := r.get("/MAAS/api/2.0/machines/k7qpwx/?op=power_parameters"); resp.StatusCode != 200 || !strings.Contains(body, "calvin") {
		t.Fatalf("admin power_parameters: %d %q", resp.StatusCode, body)
	}
	ud := "I2Nsb3VkLWNvbmZpZwpzZWNyZXQ6IGhpZGRlbgo=" // "#cloud-config\nsecret: hidden\n"
	_, body := r.post("/MAAS/api/2.0/machines/k7qpwx/?op=deploy", url.Values{"user_data": {ud}, "distro_series": {"jammy"}})
	_, body2 := r.get("/MAAS/api/2.0/machines/k7qpwx/")
	for _, b := range []string{body, body2} {
		if strings.Contains(b, ud) || strings.Contains(b, "hidden") || strings.Contains(b, "calvin") {
			t.Fatalf("echoed: %s", b)
		}
	}
	if string(r.s.UserData("k7qpwx")) != "#cloud-config\nsecret: hidden\n" {
		t.Fatalf("stored user data %q", r.s.UserData("k7qpwx"))
	}
	for _, req := range r.s.Requests() {
		if strings.Contains(fmt.Sprint(req.Form), ud) {
			t.Fatalf("recorded user data: %+v", req)
		}
	}
}

func TestFakeClockOrdersTimers(t *testing.T) {
	c := NewFakeClock(time.Unix(0, 0))
	var got []string
	c.AfterFunc(3*time.Second, func() { got = append(got, fmt.Sprint("c@", c.Now().Unix())) })
	c.AfterFunc(1*time.Second, func() {
		got = append(got, fmt.Sprint("a@", c.Now().Unix()))
		c.AfterFunc(time.Second, func() { got = append(got, fmt.Sprint("b@", c.Now().Unix())) })
	})
	stopped := c.AfterFunc(2*time.Second, func() { got = append(got, "never") })
	if !stopped.Stop() {
		t.Fatal("stop")
	}
	c.Advance(2500 * time.Millisecond)
	if strings.Join(got, ",") != "a@1,b@2" || c.Pending() != 1 {
		t.Fatalf("%v pending %d", got, c.Pending())
	}
	c.Advance(time.Second)
	if strings.Join(got, ",") != "a@1,b@2,c@3" || c.Now().Unix() != 3 {
		t.Fatalf("%v %v", got, c.Now())
	}
}

func TestFixtureParsing(t *testing.T) {
	f, err := ParseFixture([]byte(`{"config":{"enable_disk_erasing_on_release":true},
		"machines":[{"system_id":"abc123","hostname":"n1","status":4,"power_type":"manual","test_outcomes":{"memtester":"failed"}}]}`))
	if err != nil || len(f.Machines) != 1 || f.Config["enable_disk_erasing_on_release"] != true {
		t.Fatalf("%v %+v", err, f)
	}
	if _, err := ParseFixture([]byte(`[{"system_id":"abc123","hostname":"n1","sttus":4}]`)); err == nil {
		t.Fatal("typo accepted")
	}
	if _, err := New(Options{Users: []User{{Username: "u", APIKey: "a:b:c"}}, Fixture: Fixture{Machines: []MachineSpec{{SystemID: "xxxx", Hostname: "h", TestOutcomes: map[string]string{"nosuch": "failed"}}}}}); err == nil {
		t.Fatal("unknown script accepted")
	}
	gen := GenerateMachines(300, 1)
	seen := map[string]bool{}
	for _, m := range gen {
		if seen[m.SystemID] {
			t.Fatalf("duplicate id %s", m.SystemID)
		}
		seen[m.SystemID] = true
	}
	if len(gen) != 300 || GenerateMachines(300, 1)[299].SystemID != gen[299].SystemID {
		t.Fatal("generator not deterministic")
	}
	if _, err := New(Options{Users: []User{{Username: "u", APIKey: "a:b:c"}}, Fixture: Fixture{Machines: gen}}); err != nil {
		t.Fatal(err)
	}
}

func TestTestingStatusAggregate(t *testing.T) {
	res := func(sts ...int) []scriptResult {
		var out []scriptResult
		for _, s := range sts {
			out = append(out, scriptResult{status: s})
		}
		return out
	}
	for _, c := range []struct {
		in   []scriptResult
		want int
	}{
		{nil, ScriptUnknown},
		{res(ScriptAborted), ScriptUnknown},
		{res(ScriptPassed, ScriptRunning, ScriptFailed), ScriptRunning},
		{res(ScriptPassed, ScriptPending, ScriptFailed), ScriptPending},
		{res(ScriptPassed, ScriptTimedOut, ScriptDegraded), ScriptFailed},
		{res(ScriptPassed, ScriptDegraded), ScriptDegraded},
		{res(ScriptPassed, ScriptSkipped, ScriptAborted), ScriptPassed},
	} {
		if got := aggregate(c.in, nil); got != c.want {
			t.Errorf("%v: %d want %d", c.in, got, c.want)
		}
	}
}

func TestTLSModes(t *testing.T) {
	for _, mode := range []TLSMode{TLSSelfSignedLeaf, TLSCASignedLeaf, TLSCAMarked} {
		c, err := GenerateCertificates(mode, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		leaf := c.cert.Leaf
		if leaf == nil {
			t.Fatal("no parsed leaf")
		}
		if leaf.IsCA != (mode == TLSCAMarked) {
			t.Errorf("mode %d: IsCA %v", mode, leaf.IsCA)
		}
		if len(leaf.IPAddresses) < 2 || leaf.DNSNames[0] != "localhost" || !strings.HasPrefix(leaf.PublicKeyAlgorithm.String(), "ECDSA") {
			t.Errorf("mode %d: SANs %v %v, key %v", mode, leaf.IPAddresses, leaf.DNSNames, leaf.PublicKeyAlgorithm)
		}
	}
}

func TestNodeHardwareReads(t *testing.T) {
	sp := machineSpec("k7qpwx", StatusReady)
	sp.StorageBytes = 0
	sp.Disks = []DiskSpec{{Name: "nvme0n1", SizeBytes: 3_840_755_982_336}, {Name: "sda", SizeBytes: 480_103_981_056, Model: "MZ7L3480"}}
	sp.Interfaces = []InterfaceSpec{{Name: "eno1", LinkSpeed: 25000}, {Name: "eno2", InterfaceSpeed: 25000}}
	fresh := MachineSpec{SystemID: "nnnn01", Hostname: "fresh", Status: StatusNew, PowerType: "ipmi", CPUCount: 8, Memory: 4096,
		Disks: []DiskSpec{{Name: "sda", SizeBytes: 1e12}}}
	owned := machineSpec("own001", StatusDeployed)
	owned.Owner = "apelora"
	r := newRig(t, sp, fresh, owned)

	var disks []map[string]any
	resp, body := r.get("/MAAS/api/2.0/nodes/k7qpwx/blockdevices/")
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &disks) != nil || len(disks) != 2 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if disks[0]["name"] != "nvme0n1" || disks[0]["size"] != 3_840_755_982_336.0 || disks[0]["type"] != "physical" ||
		disks[1]["model"] != "MZ7L3480" || disks[1]["resource_uri"] != fmt.Sprintf("/MAAS/api/2.0/nodes/k7qpwx/blockdevices/%v/", disks[1]["id"]) {
		t.Fatalf("block devices %v", disks)
	}
	var nics []map[string]any
	_, body = r.get("/MAAS/api/2.0/nodes/k7qpwx/interfaces/")
	if json.Unmarshal([]byte(body), &nics) != nil || len(nics) != 2 {
		t.Fatalf("interfaces %s", body)
	}
	if nics[0]["link_speed"] != 25000.0 || nics[0]["link_connected"] != true || nics[1]["link_speed"] != 0.0 ||
		nics[1]["interface_speed"] != 25000.0 || nics[1]["link_connected"] != false || nics[0]["mac_address"] == nics[1]["mac_address"] {
		t.Fatalf("interfaces %v", nics)
	}
	// The machine's own read carries the same hardware, and storage is the disks added up.
	var m map[string]any
	_, body = r.get("/MAAS/api/2.0/machines/k7qpwx/")
	if json.Unmarshal([]byte(body), &m) != nil || m["storage"] != 4320859.963392 || len(m["interface_set"].([]any)) != 2 ||
		m["boot_disk"].(map[string]any)["name"] != "nvme0n1" {
		t.Fatalf("machine %v %v %v", m["storage"], m["interface_set"], m["boot_disk"])
	}

	// Never commissioned: no disks yet, only the boot interface known from enlistment.
	_, body = r.get("/MAAS/api/2.0/nodes/nnnn01/blockdevices/")
	if strings.TrimSpace(body) != "[]" {
		t.Fatalf("a New machine's block devices: %s", body)
	}
	_, body = r.get("/MAAS/api/2.0/nodes/nnnn01/interfaces/")
	if json.Unmarshal([]byte(body), &nics) != nil || len(nics) != 1 || nics[0]["link_speed"] != 0.0 || nics[0]["name"] != "eno1" {
		t.Fatalf("a New machine's interfaces: %s", body)
	}

	if resp, body := r.get("/MAAS/api/2.0/nodes/zzzz99/interfaces/"); resp.StatusCode != 404 || body != "No Node matches the given query." {
		t.Fatalf("unknown node: %d %q", resp.StatusCode, body)
	}
	if resp, body := r.post("/MAAS/api/2.0/nodes/k7qpwx/blockdevices/", url.Values{}); resp.StatusCode != 400 || !strings.Contains(body, "Unrecognised signature") {
		t.Fatalf("POST: %d %q", resp.StatusCode, body)
	}
	if resp, _ := r.do("GET", "/MAAS/api/2.0/nodes/own001/blockdevices/", "", nil, "vc:vt:vs"); resp.StatusCode != 403 {
		t.Fatalf("another user's machine: %d", resp.StatusCode)
	}
	if resp, _ := r.do("GET", "/MAAS/api/2.0/nodes/k7qpwx/blockdevices/", "", nil, ""); resp.StatusCode != 401 {
		t.Fatalf("unsigned: %d", resp.StatusCode)
	}

	// Fixtures that contradict themselves are refused.
	for _, bad := range []MachineSpec{
		{SystemID: "bad1", Hostname: "b1", Disks: []DiskSpec{{Name: "sda"}}},
		{SystemID: "bad2", Hostname: "b2", Disks: []DiskSpec{{Name: "sda", SizeBytes: 1}, {Name: "sda", SizeBytes: 1}}},
		{SystemID: "bad3", Hostname: "b3", StorageBytes: 5, Disks: []DiskSpec{{Name: "sda", SizeBytes: 1}}},
		{SystemID: "bad4", Hostname: "b4", Interfaces: []InterfaceSpec{{Name: "eno1", LinkSpeed: -1}}},
		{SystemID: "bad5", Hostname: "b5", Interfaces: []InterfaceSpec{{Name: "eno1", MACAddress: "nope"}}},
	} {
		if _, err := New(Options{Users: []User{{Username: "u", APIKey: "a:b:c"}}, Fixture: Fixture{Machines: []MachineSpec{bad}}}); err == nil {
			t.Errorf("fixture %+v accepted", bad)
		}
	}
}

func TestDeployedMachineBootsWithItsUserData(t *testing.T) {
	r := newRig(t, machineSpec("k7qpwx", StatusReady), machineSpec("plain1", StatusReady))
	type boot struct {
		id string
		ud []byte
	}
	boots := make(chan boot, 4)
	release := make(chan struct{})
	r.s.OnDeploy(func(id string, ud []byte) {
		boots <- boot{id, ud}
		<-release // a slow boot holds nothing else up
	})
	script := []byte("#!/bin/sh\necho hello\n")
	if resp, body := r.post("/MAAS/api/2.0/machines/k7qpwx/?op=deploy", url.Values{"user_data": {base64.StdEncoding.EncodeToString(script)}}); resp.StatusCode != 200 {
		t.Fatalf("deploy: %d %s", resp.StatusCode, body)
	}
	if resp, body := r.post("/MAAS/api/2.0/machines/plain1/?op=deploy", url.Values{}); resp.StatusCode != 200 {
		t.Fatalf("deploy: %d %s", resp.StatusCode, body)
	}
	select {
	case b := <-boots:
		t.Fatalf("%s booted while still Deploying", b.id)
	default:
	}
	r.clock.Advance(DefaultDurations.Deploying)
	got := map[string][]byte{}
	for range 2 {
		select {
		case b := <-boots:
			got[b.id] = b.ud
		case <-time.After(10 * time.Second):
			t.Fatal("a deployed machine did not boot")
		}
	}
	close(release)
	if !bytes.Equal(got["k7qpwx"], script) || got["plain1"] != nil {
		t.Fatalf("boots %q", got)
	}
	if s, _ := r.s.Machine("k7qpwx"); s.StatusName != "Deployed" {
		t.Fatalf("status %s", s.StatusName)
	}
	// One boot per deployment: later transitions boot nothing.
	r.clock.Advance(time.Hour)
	select {
	case b := <-boots:
		t.Fatalf("%s booted twice", b.id)
	case <-time.After(50 * time.Millisecond):
	}
}

// SetOpFault fails one op only, and a power_off held by FaultHang is never acted on;
// SetPowerType("manual") makes the power read answer 400, as a real manual machine does.
func TestOpFaultAndPowerTypeSwitch(t *testing.T) {
	r := newRig(t, machineSpec("k7qpwx", StatusDeployed))
	const m = "/MAAS/api/2.0/machines/k7qpwx/"
	r.s.SetOpFault("power_off", FaultUnavailable)
	if resp, _ := r.post(m+"?op=power_off", url.Values{}); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("power_off under its op fault: %d", resp.StatusCode)
	}
	if resp, body := r.get(m + "?op=query_power_state"); resp.StatusCode != 200 || !strings.Contains(body, `"on"`) {
		t.Fatalf("another op under power_off's fault: %d %s", resp.StatusCode, body)
	}
	r.s.SetOpFault("power_off", FaultHang)
	req, _ := http.NewRequest("POST", "http://"+r.ep.Addr+m+"?op=power_off", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", r.auth(r.key))
	if _, err := (&http.Client{Timeout: 300 * time.Millisecond}).Do(req); err == nil {
		t.Fatal("a held power_off was answered")
	}
	r.s.SetOpFault("power_off", FaultNone)
	r.clock.Advance(time.Hour)
	if _, body := r.get(m + "?op=query_power_state"); !strings.Contains(body, `"on"`) {
		t.Fatalf("a held (never received) power_off took effect: %s", body)
	}
	if resp, _ := r.post(m+"?op=power_off", url.Values{}); resp.StatusCode != 200 {
		t.Fatalf("power_off after its fault was cleared: %d", resp.StatusCode)
	}
	if err := r.s.Edit("k7qpwx", func(e *MachineEdit) { e.SetPowerType("manual") }); err != nil {
		t.Fatal(err)
	}
	if resp, body := r.get(m + "?op=query_power_state"); resp.StatusCode != http.StatusBadRequest || body != "Power state is not queryable" {
		t.Fatalf("power read of a machine made manual: %d %s", resp.StatusCode, body)
	}
}

// nodes/{id}/results/ in MAAS's shape: a script set per run with its results; started and
// ended in MAAS's display format, starttime/endtime Unix seconds or "" before they happen.
func TestNodeScriptResults(t *testing.T) {
	sp := machineSpec("k7qpwx", StatusReady)
	sp.LastTests = map[string]string{"smartctl-validate": "failed"}
	r := newRig(t, sp)

	var sets []map[string]any
	resp, body := r.get("/MAAS/api/2.0/nodes/k7qpwx/results/?type=testing")
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &sets) != nil || len(sets) != 1 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	set := sets[0]
	res := set["results"].([]any)[0].(map[string]any)
	if set["type"] != 2.0 || set["type_name"] != "Testing" || set["status_name"] != "Failed" || res["name"] != "smartctl-validate" ||
		res["status"] != 3.0 || res["status_name"] != "Failed" || res["exit_status"] != 1.0 || res["hardware_type_name"] != "Storage" ||
		res["runtime"] != "0:03:00" || res["endtime"].(float64)-res["starttime"].(float64) != 180 {
		t.Fatalf("testing set %v", set)
	}
	if _, err := time.Parse("Mon, 02 Jan. 2006 15:04:05", res["started"].(string)); err != nil {
		t.Fatalf("started %v: %v", res["started"], err)
	}
	_, body = r.get("/MAAS/api/2.0/nodes/k7qpwx/results/")
	if json.Unmarshal([]byte(body), &sets) != nil || len(sets) != 2 || sets[0]["type_name"] != "Commissioning" {
		t.Fatalf("every set: %s", body)
	}
	if resp, body := r.get("/MAAS/api/2.0/nodes/k7qpwx/results/?type=bogus"); resp.StatusCode != 400 {
		t.Fatalf("an unknown type: %d %s", resp.StatusCode, body)
	}
	if resp, _ := r.get("/MAAS/api/2.0/nodes/zzzz99/results/"); resp.StatusCode != 404 {
		t.Fatalf("an unknown machine: %d", resp.StatusCode)
	}
}

// HoldOp keeps a power_off in flight (received, not acted on) while other requests are
// answered; released, it is acted on and answered as usual.
func TestHoldOpKeepsACommandInFlight(t *testing.T) {
	r := newRig(t, machineSpec("k7hold", StatusDeployed))
	const m = "/MAAS/api/2.0/machines/k7hold/"
	release := r.s.HoldOp("power_off")
	req, _ := http.NewRequest("POST", "http://"+r.ep.Addr+m+"?op=power_off", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", r.auth(r.key))
	answered := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	for deadline := time.Now().Add(10 * time.Second); r.s.Held("power_off") != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the power_off was never held")
		}
	}
	if _, body := r.get(m + "?op=query_power_state"); !strings.Contains(body, `"on"`) {
		t.Fatalf("power read while the power_off is held: %s", body)
	}
	select {
	case code := <-answered:
		t.Fatalf("a held power_off was answered: %d", code)
	default:
	}
	release()
	if code := <-answered; code != http.StatusOK {
		t.Fatalf("the released power_off answered %d", code)
	}
	if n := r.s.Held("power_off"); n != 0 {
		t.Fatalf("%d still held after the release", n)
	}
	r.clock.Advance(time.Hour)
	if _, body := r.get(m + "?op=query_power_state"); !strings.Contains(body, `"off"`) {
		t.Fatalf("the released power_off did not take effect: %s", body)
	}
}
