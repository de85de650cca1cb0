package cli

import (
	"fmt"
	"strings"

	"github.com/batonhq/baton/client"
)

// noSuchRouteMessage is the error of a 404 that is not Baton's answer about a lease, job or
// resource: --server names something that is not a Baton server, or a wrong path prefix. It
// never dumps the answer's body (a web page); a short text body is shown, as a proxy's message.
func noSuchRouteMessage(g *globals, pe *client.ProblemError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "not a Baton server or wrong path: %s", g.server)
	if pe.URL != "" {
		fmt.Fprintf(&b, " (%s answered %d", pe.URL, pe.Status)
		if pe.Code == "" && pe.Detail != "" {
			fmt.Fprintf(&b, ": %s", pe.Detail)
		}
		b.WriteString(")")
	}
	b.WriteString("; check --server (or BATON_SERVER)")
	return b.String()
}
