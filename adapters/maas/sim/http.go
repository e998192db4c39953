package sim

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

const maxBody = 32 << 20

// opSuffixRE matches MAAS's "…/op-<name>" form (no trailing slash).
var opSuffixRE = regexp.MustCompile(`^(.*/)op-([A-Za-z0-9_]+)$`)

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	stall := s.stall
	s.mu.Unlock()
	if stall != nil {
		select {
		case <-stall:
		case <-r.Context().Done():
			return
		}
	}
	rec := Request{Method: r.Method, Path: r.URL.Path}
	query := r.URL.Query()
	body := url.Values{}
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		switch ct {
		case "application/x-www-form-urlencoded":
			b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
			if err == nil {
				body, _ = url.ParseQuery(string(b))
			}
		case "multipart/form-data":
			if err := r.ParseMultipartForm(maxBody); err == nil && r.MultipartForm != nil {
				body = url.Values(r.MultipartForm.Value)
			}
		default:
			// Piston moves JSON and other bodies to request.data and leaves
			// request.POST empty, which is where MAAS's ops read: ignored.
		}
	}
	op := query.Get("op")
	if op == "" {
		op = body.Get("op")
	}
	rest, inAPI := strings.CutPrefix(r.URL.Path, apiPrefix)
	if inAPI {
		if m := opSuffixRE.FindStringSubmatch(rest); m != nil {
			rest = m[1]
			if op == "" {
				op = m[2]
			}
		}
	}
	rec.Op = op
	params := query
	if r.Method != http.MethodGet {
		params = body
	}
	rec.Form = params
	if !s.hold(r, op) {
		return
	}

	switch s.takeFault(op) {
	case FaultDrop:
		s.record(rec)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // HTTP/2: abort the stream instead
	case FaultHang:
		s.record(rec)
		<-r.Context().Done()
		return
	case FaultUnavailable:
		rec.Status = http.StatusServiceUnavailable
		s.record(rec)
		s.writeErr(w, &apiError{status: http.StatusServiceUnavailable, contentType: "text/plain; charset=utf-8",
			body: "Unable to connect to any rack controller; no connections available.", header: map[string]string{"Retry-After": "10"}})
		return
	case FaultConflictRetry:
		rec.Status = http.StatusConflict
		s.record(rec)
		s.writeErr(w, &apiError{status: http.StatusConflict, contentType: "text/plain; charset=utf-8",
			body: "Unable to complete request: database serialization failures exhausted.", header: map[string]string{"Retry-After": "5"}})
		return
	}

	if !inAPI {
		rec.Status = http.StatusNotFound
		s.record(rec)
		s.writeErr(w, textError(http.StatusNotFound, "Not Found"))
		return
	}
	if !strings.HasSuffix(rest, "/") && rest != "" {
		// Django's APPEND_SLASH redirects GETs only.
		if r.Method == http.MethodGet {
			u := *r.URL
			u.Path += "/"
			rec.Status = http.StatusMovedPermanently
			s.record(rec)
			http.Redirect(w, r, u.RequestURI(), http.StatusMovedPermanently)
			return
		}
		rec.Status = http.StatusNotFound
		s.record(rec)
		s.writeErr(w, textError(http.StatusNotFound, "Not Found"))
		return
	}

	authParams := cloneValues(query)
	for k, vs := range body {
		authParams[k] = append(authParams[k], vs...)
	}
	user, aerr := s.authenticate(r, authParams)
	if aerr == nil {
		if user != nil {
			rec.User = user.Username
		}
		var out any
		out, aerr = s.dispatch(r.Method, strings.Split(strings.TrimSuffix(rest, "/"), "/"), op, params, user)
		if aerr == nil {
			b, err := json.Marshal(out)
			if err != nil {
				aerr = textError(http.StatusInternalServerError, err.Error())
			} else {
				rec.Status = http.StatusOK
				s.record(rec)
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.Header().Set("X-MAAS-API-Hash", s.apiHash)
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write(b)
				return
			}
		}
	}
	rec.Status = aerr.status
	s.record(rec)
	s.writeErr(w, aerr)
}

func (s *Server) writeErr(w http.ResponseWriter, e *apiError) {
	for k, v := range e.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", e.contentType)
	w.WriteHeader(e.status)
	_, _ = io.WriteString(w, e.body)
}

func unrecognised(method, op string) *apiError {
	if op == "" {
		op = "None"
	}
	return textError(http.StatusBadRequest, "Unrecognised signature: method="+method+" op="+op)
}

var (
	errForbidden = &apiError{status: http.StatusForbidden, contentType: "text/plain; charset=utf-8"}
	errNotFound  = textError(http.StatusNotFound, "No Machine matches the given query.")
)

// dispatch routes (resource, method, op) like MAAS's OperationsHandler.
func (s *Server) dispatch(method string, seg []string, op string, p url.Values, u *userKey) (any, *apiError) {
	if len(seg) == 1 && seg[0] == "version" {
		if method == http.MethodGet && op == "" {
			return s.versionJSON(), nil
		}
		return nil, unrecognised(method, op)
	}
	if u == nil {
		// Only machines/ has an anonymous handler, and it has none of the
		// operations a client would try here.
		if len(seg) == 1 && seg[0] == "machines" {
			return nil, unrecognised(method, op)
		}
		return nil, &apiError{status: http.StatusUnauthorized, contentType: "text/plain; charset=utf-8", body: "Forbidden"}
	}
	type sig struct{ method, op string }
	k := sig{method, op}
	switch {
	case len(seg) == 1 && seg[0] == "users":
		if k == (sig{http.MethodGet, "whoami"}) {
			return map[string]any{
				"username": u.Username, "email": u.Email, "is_local": true,
				"is_superuser": u.Admin, "resource_uri": apiPrefix + "users/" + u.Username + "/",
			}, nil
		}
		return nil, unrecognised(method, op)
	case len(seg) == 1 && seg[0] == "maas":
		switch k {
		case sig{http.MethodGet, "get_config"}:
			return s.getConfig(p)
		case sig{http.MethodPost, "set_config"}:
			return s.setConfig(p, u)
		}
		return nil, unrecognised(method, op)
	case len(seg) == 1 && seg[0] == "boot-resources":
		if k == (sig{http.MethodGet, ""}) {
			return s.bootResources(p)
		}
		return nil, unrecognised(method, op)
	case len(seg) == 1 && seg[0] == "machines":
		switch k {
		case sig{http.MethodGet, ""}:
			return s.listMachines(p, u)
		case sig{http.MethodPost, "allocate"}:
			return s.allocate(p, u)
		case sig{http.MethodGet, "power_parameters"}:
			return s.allPowerParameters(p, u)
		}
		return nil, unrecognised(method, op)
	case len(seg) == 2 && seg[0] == "machines":
		handlers := map[sig]func(*machine, url.Values, *userKey) (any, *apiError){
			{http.MethodGet, ""}:                  s.readMachine,
			{http.MethodGet, "query_power_state"}: s.queryPowerState,
			{http.MethodGet, "power_parameters"}:  s.powerParameters,
			{http.MethodPost, "commission"}:       s.commission,
			{http.MethodPost, "test"}:             s.test,
			{http.MethodPost, "deploy"}:           s.deploy,
			{http.MethodPost, "release"}:          s.release,
			{http.MethodPost, "abort"}:            s.abort,
			{http.MethodPost, "power_off"}:        s.powerOff,
			{http.MethodPost, "power_on"}:         s.powerOn,
		}
		h, ok := handlers[k]
		if !ok {
			return nil, unrecognised(method, op)
		}
		s.mu.Lock()
		m, found := s.byID[seg[1]]
		if !found {
			s.mu.Unlock()
			return nil, errNotFound
		}
		out, err := h(m, p, u)
		hooks := s.takeHooks(m)
		s.mu.Unlock()
		s.runHooks(hooks)
		return out, err
	case len(seg) == 3 && seg[0] == "nodes" && (seg[2] == "blockdevices" || seg[2] == "interfaces"):
		return s.nodeReads(method, seg[2], op, seg[1], p, u)
	case len(seg) == 3 && seg[0] == "nodes" && seg[2] == "results":
		return s.nodeResults(method, op, seg[1], p, u)
	}
	return nil, textError(http.StatusNotFound, "Not Found")
}

func (s *Server) versionJSON() any {
	return map[string]any{
		"capabilities": []string{
			"networks-management", "static-ipaddresses", "ipv6-deployment-ubuntu",
			"devices-management", "storage-deployment-ubuntu", "network-deployment-ubuntu",
			"bridging-interface-ubuntu", "bridging-automatic-ubuntu", "authenticate-api",
		},
		"version":    s.version,
		"subversion": "",
	}
}
