package cli

import (
	"os"
	"os/user"

	"github.com/batonhq/baton/store"
)

// osActor names the person running the CLI for the audit log of an admin action on a server
// without auth, where no token names them: "user@host" from the OS account ($USER if the
// account cannot be looked up), or "" if neither is known (the server then records "unknown").
// A server with auth records the token's name and ignores this hint.
func osActor() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		return ""
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		name += "@" + host
	}
	if store.ValidateHolder(name) != nil {
		return "" // a name the audit log would refuse: better "unknown" than a failed release
	}
	return name
}

// actor is the actor an admin's change sends: the OS user without a token; with a token, none,
// as the server records the token's name instead.
func (a *app) actor() string {
	if a.g.token != "" {
		return ""
	}
	return osActor()
}
