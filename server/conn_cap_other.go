//go:build !unix

package server

// defaultMaxConns is DefaultMaxConns: the process's open-file limit is not read here.
func defaultMaxConns() int { return DefaultMaxConns }
