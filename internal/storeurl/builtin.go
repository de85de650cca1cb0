package storeurl

import (
	"slices"

	"github.com/batonhq/baton/store/postgres"
	batonredis "github.com/batonhq/baton/store/redis"
	"github.com/batonhq/baton/store/sqlite"
)

// builtin is a scheme of a backend in this module, which every baton binary opens.
type builtin struct {
	scheme string
	open   Opener
	listed bool // by error messages; postgresql is another name for postgres
}

// builtins are registered before anything else, and error messages list them first, in this
// order.
var builtins = []builtin{
	{"sqlite", sqlite.OpenURL, true},
	{"postgres", postgres.URLOpener("postgres"), true},
	{"postgresql", postgres.URLOpener("postgresql"), false},
	{"redis", batonredis.URLOpener("redis"), true},
	{"rediss", batonredis.URLOpener("rediss"), true},
	{"redis+redlock", batonredis.OpenRedlockURL, true},
}

func builtinOpeners() map[string]Opener {
	m := make(map[string]Opener, len(builtins))
	for _, b := range builtins {
		m[b.scheme] = b.open
	}
	return m
}

func isBuiltin(scheme string) bool {
	return slices.ContainsFunc(builtins, func(b builtin) bool { return b.scheme == scheme })
}
