package kubernetes

import (
	"context"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/batonhq/baton/store"
)

// listChunk is how many objects one list call of the API server returns.
const listChunk = 500

// List returns live leases in key order. The API server can neither sort nor filter by an
// annotation, so every call reads all of the namespace's Baton Leases (in chunks of listChunk)
// and filters and sorts here: a page costs a read of the whole namespace.
func (s *Store) List(ctx context.Context, p *store.ListParams) ([]*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out []*store.Lease
	opts := metav1.ListOptions{LabelSelector: selector, Limit: listChunk}
	for {
		list, err := s.leases.List(ctx, opts)
		if err != nil {
			return nil, s.closed.Wrap(err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			key := obj.Annotations[annKey]
			if !strings.HasPrefix(key, p.Prefix) || key <= p.After || ObjectName(key) != obj.Name {
				continue
			}
			v, err := s.viewOf(obj, key)
			if err != nil || !v.live() || (p.Holder != "" && v.rec.Holder != p.Holder) {
				continue // an object that is not Baton's is no lease of this store
			}
			out = append(out, v.lease())
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}
