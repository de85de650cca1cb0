package cli

import (
	"bytes"
	"io"
	"text/tabwriter"
)

// newTable returns the writer every table of the CLI is printed through: tab-separated cells
// aligned in columns two spaces apart, and no spaces at the end of a line (a row whose last
// cells are empty would otherwise end in the padding of the columns before them).
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(&trimRight{w: w}, 0, 8, 2, ' ', 0)
}

// trimRight drops the spaces before each newline written through it. Flush of the tabwriter
// above it writes whole lines, so nothing is held back between writes but a run of spaces.
type trimRight struct {
	w      io.Writer
	spaces int // spaces seen and not yet written: written if more than spaces follow on the line
}

func (t *trimRight) Write(p []byte) (int, error) {
	var out bytes.Buffer
	for _, b := range p {
		switch b {
		case ' ':
			t.spaces++
			continue
		case '\n':
			t.spaces = 0
		default:
			out.Write(bytes.Repeat([]byte{' '}, t.spaces))
			t.spaces = 0
		}
		out.WriteByte(b)
	}
	if _, err := t.w.Write(out.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}
