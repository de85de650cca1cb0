package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// roundDuration rounds to the second, or to 100 ms under 10 s.
func roundDuration(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeTable prints leases as aligned columns.
func writeTable(w io.Writer, leases []*store.Lease) error {
	if len(leases) == 0 {
		_, err := fmt.Fprintln(w, "no live leases")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "KEY\tHOLDER\tTOKEN\tEXPIRES\tLEASE_ID")
	for _, l := range leases {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s (%s)\t%s\n", printable(l.Key), printable(l.Holder), l.Token,
			l.ExpiresAt.UTC().Format("15:04:05Z"), roundDuration(l.TTLLeft), l.ID)
	}
	return tw.Flush()
}

// printable quotes a key or holder that would break the table's columns.
func printable(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\"") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// writeLeases prints leases in the chosen format: a table, or a JSON array of lease objects.
func writeLeases(w io.Writer, g *globals, leases []*store.Lease) error {
	if g.output == "json" {
		out := make([]wire.Lease, 0, len(leases))
		for _, l := range leases {
			out = append(out, wire.LeaseFrom(l))
		}
		return writeJSON(w, out)
	}
	return writeTable(w, leases)
}

// writeLease prints one lease: a one-row table, or the lease object.
func writeLease(w io.Writer, g *globals, l *store.Lease) error {
	if g.output == "json" {
		return writeJSON(w, wire.LeaseFrom(l))
	}
	return writeTable(w, []*store.Lease{l})
}

// formatTime is a time of a table: UTC, RFC 3339, or "-" for none.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// oneLine makes a message fit a table cell: one line, at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// writeJSONLine writes v as one line of JSON (JSON Lines), for output that streams.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// blankOr prints an optional text: nothing when it is empty.
func blankOr(s string) string {
	if s == "" {
		return ""
	}
	return printable(s)
}
