package resolvers

import "github.com/apelora/fabric/internal/broadcast"

// admissionEvents maps each admission event once for every admissionChecks subscriber:
// they share the *model.AdmissionCheckEvent, which gqlgen only reads.
var admissionEvents = broadcast.NewView(mapAdmissionEvent)

// admissionBuffer is how many events an admissionChecks subscriber may fall behind before
// it is dropped: a report publishes ten, so this is several reports' worth. The buffer
// holds pointers (8 bytes each).
const admissionBuffer = 64
