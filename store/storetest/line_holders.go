package storetest

import (
	"context"
	"testing"

	"github.com/batonhq/baton/store"
)

// LineHolders reads key's line through lr and returns its tickets' holders, in line order.
func LineHolders(t testing.TB, lr store.LineReader, key string) []string {
	t.Helper()
	l, err := lr.ResourceLine(context.Background(), key, store.MaxListLimit)
	if err != nil {
		t.Fatalf("ResourceLine(%q): %v", key, err)
	}
	var out []string
	for _, tk := range l.Tickets {
		out = append(out, tk.Holder)
	}
	return out
}
