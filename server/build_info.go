package server

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// buildInfo is the baton_build_info gauge: always 1, with the build in its labels, so that a
// query can tell which servers run which build (join on it, or count by version).
func buildInfo(version, revision string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "baton_build_info",
		Help:        "The server's build: version, VCS revision and Go version in the labels; the value is 1.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}
