package store

import "strings"

// TraceParentLen is the length of a W3C traceparent of version 00:
// "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>".
const TraceParentLen = 55

// ValidateTraceParent checks a W3C traceparent (SubmitParams.TraceParent): empty, or version
// 00's form in lowercase hex, with a trace id and a parent id that are not all zeros.
func ValidateTraceParent(tp string) error {
	if tp == "" {
		return nil
	}
	const rule = `must be a W3C traceparent "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>" (lowercase hex, ids not all zeros)`
	if len(tp) != TraceParentLen || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' || tp[:2] != "00" {
		return invalid("traceparent", "%s (got %q)", rule, truncate(tp, 80))
	}
	for i, part := range []string{tp[3:35], tp[36:52], tp[53:]} {
		for j := 0; j < len(part); j++ {
			if c := part[j]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return invalid("traceparent", "%s (got %q)", rule, tp)
			}
		}
		if i < 2 && strings.Trim(part, "0") == "" {
			return invalid("traceparent", "%s (got %q)", rule, tp)
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
