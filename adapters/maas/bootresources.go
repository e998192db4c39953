package maas

import (
	"context"
	"fmt"
	"net/http"
)

// BootResource is one image MAAS holds (GET boot-resources/): an OS image synced from an
// image source, a custom image uploaded, or a bootloader. The list is readable by any
// authenticated user, so a key without admin rights can read it.
type BootResource struct {
	ID   int
	Type string // "Synced", "Uploaded" (older MAAS: "Generated" too)
	// Name is OS/release for synced images ("ubuntu/noble"), bootloader/type for
	// bootloaders ("grub-efi-signed/uefi"), or an uploaded image's name.
	Name         string
	Architecture string // "amd64/ga-24.04", "amd64/generic" …
	Subarches    string // comma-separated, synced OS images only
	Title        string // uploaded images may carry one
}

type wireBootResource struct {
	ID           int    `json:"id"`
	Type         string `json:"type"`
	Name         string `json:"name"`
	Architecture string `json:"architecture"`
	Subarches    string `json:"subarches"`
	Title        string `json:"title"`
}

// BootResources lists every boot resource in one GET boot-resources/ call, ordered as
// MAAS orders them (type, name, architecture). The list says nothing of whether an
// image's files have finished downloading (only a read by id does).
func (c *Client) BootResources(ctx context.Context) ([]BootResource, error) {
	var ws []wireBootResource
	if err := c.do(ctx, call{method: http.MethodGet, path: "boot-resources/"}, &ws); err != nil {
		return nil, fmt.Errorf("list MAAS boot resources: %w", err)
	}
	out := make([]BootResource, len(ws))
	for i, w := range ws {
		out[i] = BootResource(w)
	}
	return out, nil
}
