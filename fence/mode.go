package fence

import (
	"context"
	"net/http"
	"os"
	"strconv"
)

// Mode is how a holder holds its resource: Exclusive (alone, the default) or Shared (with
// other shared holders, never with an exclusive one), as `baton run --shared` and shared jobs
// hold their keys.
//
// The fence keeps two marks per resource: the greatest token seen in either mode, and the
// greatest exclusive token. An exclusive call is admitted only if its token is at least the
// first (and raises both); a shared call only if its token is at least the second (and raises
// the first). Shared holders' tokens interleave, so a shared call is not refused for a greater
// shared token, only for a greater exclusive one.
type Mode string

const (
	// Exclusive is the default mode: the holder has the resource to itself.
	Exclusive Mode = "exclusive"
	// Shared holders of a resource run beside each other, never beside an exclusive one.
	Shared Mode = "shared"
)

// ModeHeader carries the holder's mode: "shared" or "exclusive". A request without it is
// exclusive.
const ModeHeader = "Baton-Fencing-Mode"

// ModeStore is a Store that also admits shared holders.
type ModeStore interface {
	Store
	// EnterMode is Enter in mode: an exclusive holder is admitted as by Enter, alone, and only if
	// its token is no lower than every token seen for the resource in either mode; a shared
	// holder only if its token is no lower than every exclusive token seen, beside other shared
	// holders but never beside an exclusive one. Once shared holders are admitted, an exclusive
	// holder that waits stops later shared ones, so that a stream of them cannot starve it.
	// An unknown mode is an *InvalidArgumentError.
	EnterMode(ctx context.Context, resource string, token uint64, mode Mode) (release func(), err error)
}

// parseMode reads a mode as the header and the environment spell it; empty is Exclusive.
func parseMode(field, v string) (Mode, error) {
	switch Mode(v) {
	case "", Exclusive:
		return Exclusive, nil
	case Shared:
		return Shared, nil
	}
	return "", &InvalidArgumentError{Field: field, Rule: `must be "shared" or "exclusive" (got ` + strconv.Quote(v) + ")"}
}

func validMode(mode Mode) error {
	_, err := parseMode("mode", string(mode))
	return err
}

// HeaderMode sets the fencing headers of req for a holder in mode (Header for an exclusive
// one, whose request carries no mode header).
func HeaderMode(req *http.Request, resource string, token uint64, mode Mode) {
	Header(req, resource, token)
	if mode == Shared {
		req.Header.Set(ModeHeader, string(Shared))
	} else {
		req.Header.Del(ModeHeader)
	}
}

// modeFromEnv is the mode `baton run --shared` and `baton worker` (for a shared job) give
// their command in BATON_FENCING_MODE; unset is Exclusive.
func modeFromEnv() (Mode, error) {
	return parseMode("BATON_FENCING_MODE", os.Getenv("BATON_FENCING_MODE"))
}
