package store

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// Text that every backend stores as given. A Go string or a JSON document can carry bytes that
// are not Unicode text: invalid UTF-8, and in JSON a \u escape of a lone UTF-16 surrogate. A
// JSON decoder turns both into U+FFFD (so two different inputs become one key), PostgreSQL
// refuses them (SQLSTATE 22021, or jsonb's "invalid input syntax"), and NUL (a \u0000 escape in
// JSON) cannot be stored in PostgreSQL text or jsonb at all. Validation refuses them up front, on
// every backend, so that the answer is a 400 naming the field rather than a store error.

// JSONTextRule reports why raw, a JSON document, is not Unicode text that every backend can
// store: invalid UTF-8, or a \u escape of an unpaired UTF-16 surrogate; with nul also a \u0000
// escape (a string holding NUL). It returns "" when raw is fine. raw need not be valid JSON: the
// scan never reads past its end.
func JSONTextRule(raw []byte, nul bool) string {
	if !utf8.Valid(raw) {
		return "must be valid UTF-8"
	}
	inString := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			inString = !inString
		case c != '\\' || !inString:
		case i+1 < len(raw) && raw[i+1] != 'u':
			i++ // \" \\ \/ \b \f \n \r \t
		default:
			r, ok := hex4(raw, i+2)
			if !ok {
				i++
				continue
			}
			i += 5 // the last hex digit
			switch {
			case r == 0 && nul:
				return `must not contain \u0000 (NUL cannot be stored)`
			case utf16.IsSurrogate(r):
				if r < 0xdc00 && i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					if lo, ok := hex4(raw, i+3); ok && 0xdc00 <= lo && lo <= 0xdfff {
						i += 6 // a valid pair
						continue
					}
				}
				return fmt.Sprintf(`must not contain an unpaired UTF-16 surrogate escape (\u%04x)`, r)
			}
		}
	}
	return ""
}

// hex4 decodes the four hex digits of a \u escape at raw[i:].
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
