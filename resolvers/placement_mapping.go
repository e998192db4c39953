package resolvers

import (
	"github.com/apelora/fabric/domain/placement"
	"github.com/apelora/fabric/graph/model"
)

func mapPlacementGuard(s placement.Status) *model.PlacementGuard {
	return &model.PlacementGuard{State: model.PlacementGuardState(s.State), Message: s.Message()}
}
