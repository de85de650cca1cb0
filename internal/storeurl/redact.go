package storeurl

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// mask replaces a secret wherever a store URL is shown (as url.URL.Redacted and pgx do).
const mask = "xxxxx"

// secretWords mark a query parameter whose value is a secret: PostgreSQL's password and
// sslpassword, and, whatever the scheme, any parameter named like a password, secret, token
// or credential (a store added later, or a parameter a user adds by mistake).
var secretWords = []string{"pass", "pwd", "secret", "token", "credential", "apikey", "api_key", "private"}

func secretParam(name string) bool {
	name = strings.ToLower(name)
	return slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(name, w) })
}

// redact returns a store URL with every secret it may carry replaced by xxxxx, for logs, error
// messages and GET /v1/info: the password of the user information (the user name stays), for
// every scheme and for host lists (Redlock, etcd, PostgreSQL's multi-host URLs), the values of
// secret-named query parameters (secretParam), and the passwords of URL-valued parameters (a
// DynamoDB endpoint). It does not need the URL to parse: what it cannot place is hidden.
func redact(raw string) string {
	out, _ := redactURL(raw)
	return out
}

// redactURL is redact, also returning the secrets it hid, as they appear in raw.
func redactURL(raw string) (string, []string) {
	prefix, rest := "", raw
	if scheme, r, ok := strings.Cut(raw, "://"); ok {
		prefix, rest = scheme+"://", r
	}
	var b strings.Builder
	var secrets []string
	b.WriteString(prefix)
	// The user information ends at the last '@' of the authority, which ends at the first '/',
	// '?' or '#'. A password with an unescaped '/', '?' or '#' ends it early, after "user:"
	// and before its '@': then the userinfo is taken to run to the last '@' of all, which may
	// hide more than the password (a host:port and an '@' in a parameter's value), never less.
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 && strings.Contains(rest[:end], ":") {
		at = strings.LastIndex(rest, "@")
	}
	if at >= 0 {
		user, pass, hasPass := strings.Cut(rest[:at], ":")
		b.WriteString(user)
		if hasPass {
			b.WriteString(":" + mask)
			secrets = append(secrets, pass)
		}
		b.WriteByte('@')
		rest = rest[at+1:]
	}
	path, query, hasQuery := strings.Cut(rest, "?")
	b.WriteString(path)
	if !hasQuery {
		return b.String(), secrets
	}
	b.WriteByte('?')
	for i, pair := range strings.Split(query, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		rawKey, rawValue, hasValue := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(rawKey)
		if err != nil {
			key = rawKey
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			value = rawValue
		}
		switch {
		case hasValue && secretParam(key):
			b.WriteString(rawKey + "=" + mask)
			secrets = append(secrets, rawValue)
		case hasValue && strings.Contains(value, "://"):
			inner, innerSecrets := redactURL(value)
			if len(innerSecrets) == 0 {
				b.WriteString(pair)
				break
			}
			b.WriteString(rawKey + "=" + url.QueryEscape(inner))
			secrets = append(secrets, innerSecrets...)
		default:
			b.WriteString(pair)
		}
	}
	return b.String(), secrets
}

// secretForms lists how the secrets of raw may appear in a message: as written in the URL,
// decoded, encoded again (pgx gets the URL re-encoded) and Go-quoted (%q); longest first, so
// that a shorter form inside a longer one does not leave the rest of it behind.
func secretForms(raw string) []string {
	_, secrets := redactURL(raw)
	var forms []string
	for _, s := range secrets {
		d, err := url.PathUnescape(s)
		if err != nil {
			d = s
		}
		dq, err := url.QueryUnescape(s)
		if err != nil {
			dq = s
		}
		for _, f := range []string{s, d, dq, url.QueryEscape(d), url.PathEscape(d), quoted(s), quoted(d)} {
			if f != "" && !slices.Contains(forms, f) {
				forms = append(forms, f)
			}
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return forms
}

func quoted(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// scrub replaces every form of every secret of raw in text.
func scrub(text, raw string) string {
	for _, f := range secretForms(raw) {
		text = strings.ReplaceAll(text, f, mask)
	}
	return text
}

// scrubbedError is an error whose message had the store URL's secrets replaced. It unwraps to
// the original, so that errors.Is and errors.As still see what went wrong.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrubError returns err with the secrets of raw hidden from its message: drivers and openers
// of other modules may quote the URL they were given.
func scrubError(err error, raw string) error {
	if err == nil {
		return nil
	}
	msg := scrub(err.Error(), raw)
	if msg == err.Error() {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}
