package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/wire"
)

// maxPeriodicFile bounds serve's --periodic-file.
const maxPeriodicFile = 1 << 20

// periodicFile is the document of serve's --periodic-file.
type periodicFile struct {
	Periodic []wire.PeriodicJob `json:"periodic"`
}

// readPeriodicFile reads and checks serve's --periodic-file: {"periodic": [{"name", "schedule",
// "kind", "resource", "args", "policy", "priority"}, ...]}. Unknown members are refused, so
// that a misspelt one is not silently ignored; an error names the member at fault
// ("periodic[0].schedule").
func readPeriodicFile(name string) ([]baton.PeriodicJob, error) {
	raw, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	if len(raw) > maxPeriodicFile {
		return nil, fmt.Errorf("larger than %d bytes", maxPeriodicFile)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var f periodicFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a periodic job file ({\"periodic\": [{\"name\", \"schedule\", \"kind\", \"resource\", ...}]}): %v", err)
	}
	if dec.More() {
		return nil, errors.New("not a periodic job file: more than one JSON document")
	}
	out := make([]baton.PeriodicJob, len(f.Periodic))
	for i, p := range f.Periodic {
		if p.NextRun != nil {
			return nil, fmt.Errorf("periodic[%d].next_run: is computed by the server, not configured", i)
		}
		out[i] = p.Periodic()
	}
	if err := baton.ValidatePeriodic(out); err != nil {
		var inv *baton.InvalidArgumentError
		if errors.As(err, &inv) {
			return nil, fmt.Errorf("%s: %s", inv.Field, inv.Rule)
		}
		return nil, err
	}
	return out, nil
}
