//go:build unix

package server

import "syscall"

// defaultMaxConns is DefaultMaxConns, or half the process's open-file limit if that is lower.
func defaultMaxConns() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur/2 < DefaultMaxConns {
		return max(int(lim.Cur/2), 1)
	}
	return DefaultMaxConns
}
