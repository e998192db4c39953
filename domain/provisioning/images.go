package provisioning

import (
	"context"
	"slices"
	"strings"

	"github.com/apelora/fabric/internal/apperr"
)

// BootResource is one entry of MAAS's boot-resources/ list.
type BootResource struct {
	Type         string // Synced, Uploaded (older MAAS: Generated)
	Name         string // os/release, bootloader/type, or an uploaded image's name
	Architecture string
}

// ImageSource lists what MAAS holds to boot and install.
type ImageSource interface {
	BootResources(ctx context.Context) ([]BootResource, error)
}

// Image is an OS image an install may name.
type Image struct {
	Name          string // what Install's series takes
	OS, Release   string
	Uploaded      bool
	Architectures []string
}

// bootloaderTypes are the second half of a bootloader's name (grub-efi-signed/uefi):
// MAAS names bootloaders bootloader/type, and no OS release is named so.
var bootloaderTypes = []string{"uefi", "pxe", "open-firmware"}

// Images lists the OS images MAAS holds, one per name with its architectures, sorted by
// name; bootloaders are left out.
func (s *Service) Images(ctx context.Context) ([]Image, error) {
	if s.ImageSource == nil {
		return nil, apperr.NotConfigured(apperr.MAAS)
	}
	rs, err := s.ImageSource.BootResources(ctx)
	if err != nil {
		return nil, err
	}
	var out []Image
	for _, r := range rs {
		os, release, named := strings.Cut(r.Name, "/")
		if !named {
			os, release = "", r.Name
		}
		if named && slices.Contains(bootloaderTypes, release) {
			continue
		}
		i := slices.IndexFunc(out, func(im Image) bool { return im.Name == r.Name })
		if i < 0 {
			out = append(out, Image{Name: r.Name, OS: os, Release: release, Uploaded: r.Type == "Uploaded"})
			i = len(out) - 1
		}
		if !slices.Contains(out[i].Architectures, r.Architecture) {
			out[i].Architectures = append(out[i].Architectures, r.Architecture)
		}
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
