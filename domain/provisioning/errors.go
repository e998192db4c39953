package provisioning

import "github.com/apelora/fabric/internal/apperr"

func invalid(field, format string, args ...any) error { return apperr.Invalid(field, format, args...) }

func refused(format string, args ...any) error {
	return apperr.New(apperr.FailedPrecondition, format, args...)
}
