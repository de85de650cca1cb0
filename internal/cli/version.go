package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// buildDetails is what `baton version` prints and baton_build_info exports.
type buildDetails struct {
	Version   string // the -X version, the module version, or "devel"
	Revision  string // the VCS revision the binary was built from, "-dirty" if modified; "" if unknown
	Time      string // the revision's commit time (RFC 3339); "" if unknown
	GoVersion string
}

// readBuildDetails reads the version set at link time and what the Go toolchain embedded (the
// module version with `go install ...@v1.2.3`, the VCS revision with `go build` in a checkout).
func readBuildDetails() buildDetails {
	d := buildDetails{Version: version, Revision: revision, GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if ok {
		if d.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			d.Version = info.Main.Version
		}
		modified := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if d.Revision == "" {
					d.Revision = s.Value
				}
			case "vcs.time":
				d.Time = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if d.Revision != "" && modified && revision == "" {
			d.Revision += "-dirty"
		}
		if info.GoVersion != "" {
			d.GoVersion = info.GoVersion
		}
	}
	if d.Version == "" {
		d.Version = "devel"
	}
	return d
}

// String is the line of `baton version`: "v1.2.3 (revision 0a1b2c…, 2026-01-02T03:04:05Z; go1.26.0)".
func (d buildDetails) String() string {
	rev := "revision unknown"
	if d.Revision != "" {
		rev = "revision " + d.Revision
		if d.Time != "" {
			rev += ", " + d.Time
		}
	}
	return fmt.Sprintf("%s (%s; %s)", d.Version, rev, d.GoVersion)
}
