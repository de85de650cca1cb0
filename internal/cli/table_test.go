package cli

import (
	"bytes"
	"fmt"
	"testing"
)

// Tables end no line in spaces, also when a row's last cells are empty, and keep the spaces
// inside a cell.
func TestTableLinesEndWithoutSpaces(t *testing.T) {
	var b bytes.Buffer
	tw := newTable(&b)
	fmt.Fprintln(tw, "ID\tKIND\tREASON")
	fmt.Fprintln(tw, "1\tacquire\t")
	fmt.Fprintln(tw, "22\tforce_release\trunner wedged")
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "ID  KIND           REASON\n1   acquire\n22  force_release  runner wedged\n"
	if b.String() != want {
		t.Fatalf("table:\n%q\nwant\n%q", b.String(), want)
	}
}
