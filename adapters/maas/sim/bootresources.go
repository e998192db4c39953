package sim

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// The boot resources MAAS lists (GET boot-resources/, any authenticated user): one synced
// image per Ubuntu series in syncedSeries (what a deploy accepts), and the bootloaders a
// synced region also holds. Shaped as maasserver/api/boot_resources.py renders them:
// id, type, name, architecture, resource_uri, last_deployed, then the resource's extra
// keys (subarches for OS images).

// bootloaders are the bootloader resources of a default image sync (name is
// bootloader/type, as MAAS names them).
var bootloaders = []struct{ name, arch string }{
	{"grub-efi-signed/uefi", "amd64/generic"},
	{"grub-efi/uefi", "arm64/generic"},
	{"pxelinux/pxe", "i386/generic"},
}

type bootResourceJSON struct {
	ID           int     `json:"id"`
	Type         string  `json:"type"`
	Name         string  `json:"name"`
	Architecture string  `json:"architecture"`
	ResourceURI  string  `json:"resource_uri"`
	LastDeployed *string `json:"last_deployed"`
	Subarches    string  `json:"subarches,omitempty"`
}

func (s *Server) bootResources(p url.Values) (any, *apiError) {
	rtype, given := last(p, "type")
	if !given {
		rtype = "all"
	}
	switch rtype {
	case "all", "synced":
	case "uploaded":
		return []bootResourceJSON{}, nil // the simulator holds no uploaded image
	default:
		return nil, textError(http.StatusBadRequest, fmt.Sprintf("'%s' is not a valid boot resource type. Available types: ['synced', 'uploaded']", rtype))
	}
	s.mu.Lock()
	series := s.syncedSeries()
	s.mu.Unlock()
	var out []bootResourceJSON
	add := func(name, arch, subarches string) {
		out = append(out, bootResourceJSON{Type: "Synced", Name: name, Architecture: arch, Subarches: subarches})
	}
	for _, b := range bootloaders {
		add(b.name, b.arch, "")
	}
	for _, x := range series {
		version := seriesVersions[x]
		if version == "" {
			version = x
		}
		add("ubuntu/"+x, "amd64/ga-"+version, "generic,ga-"+version)
	}
	// MAAS orders by type, name, architecture; ids follow creation, here the same order.
	slices.SortFunc(out, func(a, b bootResourceJSON) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Architecture, b.Architecture))
	})
	for i := range out {
		out[i].ID = i + 1
		out[i].ResourceURI = fmt.Sprintf("%sboot-resources/%d/", apiPrefix, i+1)
	}
	return out, nil
}
