package resolvers

import (
	"github.com/apelora/fabric/domain/hardware"
	"github.com/apelora/fabric/graph/model"
)

// Helpers of hardware.resolvers.go (gqlgen moves helpers out of *.resolvers.go files).

func mapProfile(p *hardware.Profile) *model.HardwareProfile {
	if p == nil {
		return nil
	}
	return &model.HardwareProfile{
		Name: p.Name, Description: p.Description, Architecture: p.Architecture,
		MinCPUCores: p.MinCPUCores, MinMemoryMiB: p.MinMemoryMiB, MinDisks: p.MinDisks, MinDiskSizeGb: p.MinDiskSizeGB,
		MinNics: p.MinNICs, MinNicSpeedMbps: p.MinNICSpeedMbps, SetBy: p.SetBy, SetAt: p.SetAt,
		Machines: nonNil(p.Machines),
	}
}

func derefInt(v *int) int {
	if v == nil {
		return 0
	}
	return *v
}
