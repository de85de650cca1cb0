package client_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/store"
)

// A job's mode, extra resources and limits, and a kind's mode and limit templates, travel to the
// server and back: submit, batch submit, get and the kinds list.
func TestJobsBeyondOneKeyRoundTrip(t *testing.T) {
	b := newJobBackend(t, false)
	ctx := testContext(t)
	s := b.open(t, client.Config{ClaimWait: -1})
	for _, l := range []string{"global", "zone/eu"} {
		if _, err := s.SetLimit(ctx, &store.SetLimitParams{Name: l, Capacity: 2}); err != nil {
			t.Fatal(err)
		}
	}
	kind := store.Kind{Name: "drain", Mode: store.ModeShared, Limits: []string{"zone/{args.zone}"}}
	if err := s.RegisterKinds(ctx, []store.Kind{kind, {Name: "plain"}}); err != nil {
		t.Fatal(err)
	}
	kinds, err := s.Kinds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(kinds, func(k store.Kind) bool { return k.Name == "drain" })
	if i < 0 || kinds[i].Mode != store.ModeShared || !slices.Equal(kinds[i].Limits, kind.Limits) {
		t.Fatalf("Kinds() = %+v; want drain shared with limits %v", kinds, kind.Limits)
	}

	res, err := s.SubmitJob(ctx, &store.SubmitParams{Kind: "drain", Resource: "node/1", Args: json.RawMessage(`{"zone":"eu"}`),
		Resources: []string{"rack/7"}, Limits: []string{"global"}})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, j *store.Job, shared bool, resources, limits []string) {
		t.Helper()
		if j.Shared != shared || !slices.Equal(j.Resources, resources) || !slices.Equal(j.Limits, limits) {
			t.Fatalf("%s: shared %v, resources %v, limits %v; want %v, %v, %v", what, j.Shared, j.Resources, j.Limits,
				shared, resources, limits)
		}
	}
	check("submit", res.Job, true, []string{"rack/7"}, []string{"global", "zone/eu"})
	j, err := s.GetJob(ctx, res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("get", j, true, []string{"rack/7"}, []string{"global", "zone/eu"})

	// The submit's mode overrides the kind's.
	many, err := s.SubmitMany(ctx, []*store.SubmitParams{
		{Kind: "drain", Resource: "node/2", Args: json.RawMessage(`{"zone":"eu"}`), Mode: store.ModeExclusive},
		{Kind: "plain", Resource: "node/3", Mode: store.ModeShared, Limits: []string{"global"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	check("batch job 0", many[0].Job, false, nil, []string{"zone/eu"})
	check("batch job 1", many[1].Job, true, nil, []string{"global"})

	// The server's refusals name the field: an unknown limit, a template's missing argument.
	_, err = s.SubmitJob(ctx, &store.SubmitParams{Kind: "plain", Resource: "node/4", Limits: []string{"nope"}})
	var inv *store.InvalidArgumentError
	if !errors.As(err, &inv) || inv.Field != "limits" {
		t.Fatalf("submit with an unknown limit: %v; want invalid limits", err)
	}
	_, err = s.SubmitJob(ctx, &store.SubmitParams{Kind: "drain", Resource: "node/4"})
	if !errors.As(err, &inv) || inv.Field != "args.zone" {
		t.Fatalf("submit without the template's argument: %v; want invalid args.zone", err)
	}
}
