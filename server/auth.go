package server

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// Role is what a token may do. Each role includes the ones below it.
type Role int

// Roles, weakest first.
const (
	RoleNone  Role = iota
	RoleRead       // GET endpoints
	RoleWrite      // acquire, renew, release
	RoleAdmin      // force-release and the audit log
)

func (r Role) String() string {
	switch r {
	case RoleRead:
		return "read"
	case RoleWrite:
		return "write"
	case RoleAdmin:
		return "admin"
	default:
		return "none"
	}
}

func parseRole(s string) (Role, bool) {
	for _, r := range []Role{RoleRead, RoleWrite, RoleAdmin} {
		if s == r.String() {
			return r, true
		}
	}
	return RoleNone, false
}

// Auth holds the server's bearer tokens, hashed. The file has one token a line:
//
//	# name  role   sha256 of the token, hex
//	ci      write  9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//
// (printf %s "$TOKEN" | sha256sum gives the hash.) Tokens themselves are never stored.
type Auth struct {
	entries []authEntry
}

type authEntry struct {
	name string
	role Role
	hash [sha256.Size]byte
}

// LoadAuthFile reads an auth file.
func LoadAuthFile(path string) (*Auth, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a, err := ParseAuth(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// ParseAuth reads the auth file format from r.
func ParseAuth(r io.Reader) (*Auth, error) {
	a := &Auth{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: want \"name role sha256-hex\", got %d fields", n, len(f))
		}
		role, ok := parseRole(f[1])
		if !ok {
			return nil, fmt.Errorf("line %d: role %q must be read, write or admin", n, f[1])
		}
		raw, err := hex.DecodeString(f[2])
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("line %d: the hash must be 64 hex digits (sha256 of the token)", n)
		}
		e := authEntry{name: f[0], role: role}
		copy(e.hash[:], raw)
		a.entries = append(a.entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(a.entries) == 0 {
		return nil, fmt.Errorf("no tokens")
	}
	return a, nil
}

// HashToken returns the hex SHA-256 of a token, as the auth file stores it.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// authenticate returns the name and role of token. It compares against every entry in constant
// time, so timing tells nothing about which entry, or how much of a hash, matched.
func (a *Auth) authenticate(token string) (string, Role) {
	h := sha256.Sum256([]byte(token))
	name, role := "", RoleNone
	for _, e := range a.entries {
		if subtle.ConstantTimeCompare(h[:], e.hash[:]) == 1 {
			name, role = e.name, e.role
		}
	}
	return name, role
}

// principal is who made a request.
type principal struct {
	name string
	role Role
}

// authorize returns the caller, or answers 401/403 and returns false.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, need Role) (principal, bool) {
	if s.cfg.Auth == nil {
		return principal{name: "anonymous", role: RoleAdmin}, true
	}
	if need == RoleNone {
		return principal{}, true
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		s.refusals.refused(r, reasonMissing, "")
		w.Header().Set("WWW-Authenticate", `Bearer realm="baton"`)
		writeProblem(w, newProblem(http.StatusUnauthorized, "unauthorized", "send Authorization: Bearer <token>"))
		return principal{}, false
	}
	name, role := s.cfg.Auth.authenticate(token)
	if role == RoleNone {
		s.refusals.refused(r, reasonUnknown, "")
		w.Header().Set("WWW-Authenticate", `Bearer realm="baton", error="invalid_token"`)
		writeProblem(w, newProblem(http.StatusUnauthorized, "unauthorized", "unknown token"))
		return principal{}, false
	}
	if role < need {
		s.refusals.refused(r, reasonForbidden, name)
		p := newProblem(http.StatusForbidden, "forbidden", fmt.Sprintf("this call needs the %s role; token %q has %s", need, name, role))
		p.RequiredRole = need.String()
		writeProblem(w, p)
		return principal{}, false
	}
	return principal{name: name, role: role}, true
}
