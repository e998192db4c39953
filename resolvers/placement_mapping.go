package resolvers

import (
	"github.com/apelora/fabric/graph/model"
	"github.com/apelora/fabric/placement"
)

func mapPlacementGuard(s placement.Status) *model.PlacementGuard {
	return &model.PlacementGuard{State: model.PlacementGuardState(s.State), Message: s.Message()}
}
