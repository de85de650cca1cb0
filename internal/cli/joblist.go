package cli

import (
	"context"
	"slices"
	"strings"

	"github.com/batonhq/baton/store"
)

// listFlag is a filter flag that may be given several times; with split, a value may also hold
// several separated by commas (not for resource keys, which may contain commas). Duplicates are
// dropped.
type listFlag struct {
	vals  []string
	split bool
}

func (l *listFlag) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.vals, ",")
}

// Get is the values as given, comma-separated (flag.Getter: serve reads flags' types through it).
func (l *listFlag) Get() any { return l.String() }

func (l *listFlag) Set(v string) error {
	parts := []string{v}
	if l.split {
		parts = strings.Split(v, ",")
	}
	for _, s := range parts {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(l.vals, s) {
			l.vals = append(l.vals, s)
		}
	}
	return nil
}

// maxFilterCombos bounds the queries one listing may fan out to (states × kinds × resources).
const maxFilterCombos = 64

// jobFilters are the values of a listing's --state, --kind and --resource; an empty list is
// no filter.
type jobFilters struct {
	states, kinds, resources []string
}

// params returns one JobListParams per combination of the filters' values, each validated, so
// that bad input is refused before anything is asked of the server.
func (f jobFilters) params(after int64, limit int) ([]*store.JobListParams, error) {
	orAny := func(v []string) []string {
		if len(v) == 0 {
			return []string{""}
		}
		return v
	}
	var out []*store.JobListParams
	for _, s := range orAny(f.states) {
		for _, k := range orAny(f.kinds) {
			for _, r := range orAny(f.resources) {
				p := &store.JobListParams{State: store.JobState(s), Kind: k, Resource: r, After: after, Limit: limit}
				if err := p.Validate(); err != nil {
					return nil, err
				}
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// listJobsAny lists the jobs matching any of ps (which differ only in their filters), one page
// in ID order: the first Limit IDs after After of their union. The filters' combinations are
// disjoint (a job has one state, kind and resource), and each query's first Limit IDs include
// every ID of the union's first Limit that it matches, so the merge is exact.
func listJobsAny(ctx context.Context, js store.JobStore, ps []*store.JobListParams) ([]*store.Job, error) {
	if len(ps) == 1 {
		return js.ListJobs(ctx, ps[0])
	}
	var all []*store.Job
	for _, p := range ps {
		page, err := js.ListJobs(ctx, p)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
	}
	slices.SortFunc(all, func(a, b *store.Job) int { return int(min(max(a.ID-b.ID, -1), 1)) })
	all = slices.CompactFunc(all, func(a, b *store.Job) bool { return a.ID == b.ID })
	if limit := ps[0].Limit; len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}
