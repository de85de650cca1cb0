package fence

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrStaleToken matches (errors.Is) every *StaleTokenError.
var ErrStaleToken = errors.New("fence: stale fencing token")

// StaleTokenError says that a greater token than Token has already been seen for Resource:
// the holder of Token has lost its lease, and its write must not happen.
type StaleTokenError struct {
	Resource string
	Token    uint64 // the token presented
	Current  uint64 // the greatest token seen for the resource
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("fence: stale fencing token %d for resource %q: token %d has been seen", e.Token, e.Resource, e.Current)
}

// Is makes errors.Is(err, ErrStaleToken) true.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// ErrInvalidArgument matches (errors.Is) every *InvalidArgumentError.
var ErrInvalidArgument = errors.New("fence: invalid argument")

// InvalidArgumentError names the argument that broke a rule; nothing was written.
type InvalidArgumentError struct {
	Field string
	Rule  string
}

func (e *InvalidArgumentError) Error() string { return "fence: " + e.Field + " " + e.Rule }

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *InvalidArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// MaxResourceLen is the longest resource key accepted, in bytes.
const MaxResourceLen = 1024

// maxToken is the greatest token a SQL fence table can store (a signed 64-bit column).
const maxToken = 1<<63 - 1

func validate(resource string, token uint64) error {
	switch {
	case resource == "":
		return &InvalidArgumentError{Field: "resource", Rule: "must not be empty"}
	case len(resource) > MaxResourceLen:
		return &InvalidArgumentError{Field: "resource", Rule: fmt.Sprintf("must be at most %d bytes", MaxResourceLen)}
	case !utf8.ValidString(resource) || strings.IndexByte(resource, 0) >= 0:
		return &InvalidArgumentError{Field: "resource", Rule: "must be valid UTF-8 without NUL bytes"}
	case token == 0:
		return &InvalidArgumentError{Field: "token", Rule: "must be at least 1 (0 is never a fencing token)"}
	case token > maxToken:
		return &InvalidArgumentError{Field: "token", Rule: fmt.Sprintf("must be at most %d", uint64(maxToken))}
	}
	return nil
}
