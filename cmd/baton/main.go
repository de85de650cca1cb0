// Command baton is Baton's single binary: the server (`baton serve`), a CLI for its HTTP API,
// `baton run` (a distributed flock) and `baton worker`. Its code is in internal/cli.
package main

import (
	"os"

	"github.com/batonhq/baton/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
