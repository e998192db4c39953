package maas

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"time"
)

// ResultKind is which run a script result belongs to (MAAS's RESULT_TYPE).
type ResultKind string

const (
	ResultCommissioning ResultKind = "commissioning"
	ResultTesting       ResultKind = "testing"
)

// ScriptResult is one script's outcome in a machine's latest commissioning or testing run,
// as MAAS's machine page lists them.
type ScriptResult struct {
	Kind ResultKind
	Name string // "smartctl-validate", "00-maas-01-commissioning"
	// Status is MAAS's SCRIPT_STATUS and StatusName its label ("Passed", "Failed" …).
	Status     ScriptStatus
	StatusName string
	// HardwareType is MAAS's label for what the script tests: "Node", "CPU", "Storage" …
	HardwareType string
	// Started and Ended are zero until the script started and ended.
	Started, Ended time.Time
}

// Runtime is how long the script ran; 0 until it ended.
func (r ScriptResult) Runtime() time.Duration {
	if r.Started.IsZero() || r.Ended.IsZero() {
		return 0
	}
	return r.Ended.Sub(r.Started)
}

type wireScriptSet struct {
	ID      int                `json:"id"`
	Type    int                `json:"type"`
	Results []wireScriptResult `json:"results"`
}

type wireScriptResult struct {
	Name             string    `json:"name"`
	Status           int       `json:"status"`
	StatusName       string    `json:"status_name"`
	HardwareTypeName string    `json:"hardware_type_name"`
	StartTime        unixMaybe `json:"starttime"`
	EndTime          unixMaybe `json:"endtime"`
}

// unixMaybe is MAAS's starttime/endtime: Unix seconds as a number, or "" (or null) when
// the script has not started or ended. The display fields (started, ended) carry no zone;
// these do not need one.
type unixMaybe struct{ t time.Time }

func (u *unixMaybe) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case float64:
		sec, frac := math.Modf(x)
		u.t = time.Unix(int64(sec), int64(frac*1e9)).UTC()
	case string, nil:
		if x != nil && x != "" {
			return fmt.Errorf("MAAS sent %q for a script's start or end time: expected Unix seconds or \"\"", x)
		}
		u.t = time.Time{}
	default:
		return fmt.Errorf("MAAS sent %s for a script's start or end time: expected Unix seconds or \"\"", b)
	}
	return nil
}

// ScriptResults lists the script results of a machine's latest commissioning and testing
// runs, commissioning first: GET nodes/{id}/results/ with type=, one call per kind. A
// machine that never ran one has none of that kind.
func (c *Client) ScriptResults(ctx context.Context, systemID string) ([]ScriptResult, error) {
	if err := checkSystemID(systemID); err != nil {
		return nil, err
	}
	var out []ScriptResult
	for _, kind := range []ResultKind{ResultCommissioning, ResultTesting} {
		var sets []wireScriptSet
		if err := c.do(ctx, call{method: http.MethodGet, path: "nodes/" + systemID + "/results/",
			params: url.Values{"type": {string(kind)}}}, &sets); err != nil {
			return nil, fmt.Errorf("list the %s results of MAAS machine %s: %w", kind, systemID, err)
		}
		// MAAS keeps earlier runs' sets too; the latest (highest id) is the one the
		// machine's status reflects.
		latest := -1
		for i := range sets {
			if latest < 0 || sets[i].ID > sets[latest].ID {
				latest = i
			}
		}
		if latest < 0 {
			continue
		}
		for _, w := range sets[latest].Results {
			out = append(out, ScriptResult{Kind: kind, Name: w.Name, Status: ScriptStatus(w.Status), StatusName: w.StatusName,
				HardwareType: w.HardwareTypeName, Started: w.StartTime.t, Ended: w.EndTime.t})
		}
	}
	return out, nil
}
