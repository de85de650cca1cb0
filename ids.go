package baton

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// newID returns a random 128-bit lease ID.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

func defaultHolderPrefix() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}

func (l *Locker) uniqueHolder() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return l.holderPrefix + ":" + hex.EncodeToString(b[:])
}
