package cli

import (
	"fmt"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// cancelInfo says when a cancelled job was cancelled and what the cancel stopped, apart from
// the error of an earlier attempt, which is not the cancel's reason.
func cancelInfo(j *store.Job) string {
	last, c := wire.JobOutcome(j)
	if c == nil {
		return ""
	}
	s := "cancelled " + formatTime(c.At.Time)
	switch {
	case c.DuringAttempt > 0:
		s += fmt.Sprintf(" while attempt %d ran", c.DuringAttempt)
	case j.Attempt == 0:
		s += " before any attempt"
	default:
		s += fmt.Sprintf(" between attempts (after %d)", j.Attempt)
		if last != nil {
			s += "; attempt " + fmt.Sprint(last.Attempt) + " had failed: " + oneLine(last.Code+": "+last.Message, 60)
		}
	}
	return s
}
