// Package fielderr is the one "invalid field" error of the console's
// internal packages (internal/audit, internal/store, internal/ops): an argument refused
// before the database is asked, named as the form, query or column names
// it, with the reason. The web handlers find it with errors.As and answer
// a 4xx that names the field.
//
// The library's contract packages keep their own, for drivers that must
// not import the console: idemdriver.FieldError and sagadriver.FieldError.
package fielderr

// Error is an argument refused by package In: Field names it and Reason
// says why. It matches Is (the package's ErrInvalid) with errors.Is.
type Error struct {
	Field  string
	Reason string
	// In is the refusing package, the prefix of the message ("audit").
	In string
	// Is is the package's sentinel the error matches.
	Is error
}

func (e *Error) Error() string {
	return e.In + ": invalid " + e.Field + ": " + e.Reason
}

// Unwrap lets errors.Is match the package's sentinel.
func (e *Error) Unwrap() error { return e.Is }
