package store

import "unicode/utf8"

// PrefixEnd returns the smallest string that is greater, in byte order, than every string that
// starts with prefix, so that "key >= prefix AND key < end" selects exactly the keys with that
// prefix and an index on key can be read as one range. ok is false when there is no such
// string (an empty prefix, or one made only of the greatest code point / byte): then only the
// lower bound applies.
//
// For valid UTF-8 the end is valid UTF-8 too (PostgreSQL refuses anything else): the last code
// point is replaced by the next one (skipping the surrogates, which UTF-8 text cannot hold), and
// a trailing U+10FFFF is dropped and the carry moves left. UTF-8 byte order is code point order,
// so this is the same bound as on bytes. Anything that is not valid UTF-8 is bounded on bytes:
// the last byte below 0xFF is incremented and what follows it dropped.
func PrefixEnd(prefix string) (end string, ok bool) {
	if !utf8.ValidString(prefix) {
		b := []byte(prefix)
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] < 0xff {
				b[i]++
				return string(b[:i+1]), true
			}
		}
		return "", false
	}
	for p := prefix; p != ""; {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		switch {
		case r == utf8.MaxRune:
			continue // carry: no code point follows U+10FFFF
		case r == 0xd7ff:
			r = 0xe000 // past the surrogates
		default:
			r++
		}
		return p + string(r), true
	}
	return "", false
}
