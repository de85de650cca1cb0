package baton_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/batonhq/baton"
)

// Every list of package baton returns a page of the same shape: the items, and Next, set when
// the page is full, which the next call takes as After. A full last page is followed by an
// empty one.
func TestListPages(t *testing.T) {
	ctx := testCtx(t)
	st := openSQLite(t)
	q := newQueue(t, st, baton.Kind{Name: "k"})
	var wantJobs []int64
	for i := range 5 {
		wantJobs = append(wantJobs, submit(t, q, baton.SubmitParams{Kind: "k", Resource: fmt.Sprintf("r/%d", i)}).ID)
	}
	var jobs []int64
	pages := 0
	for after := int64(0); ; {
		page, err := q.ListJobs(ctx, baton.JobListParams{After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, j := range page.Jobs {
			jobs = append(jobs, j.ID)
		}
		if (page.Next != 0) != (len(page.Jobs) == 2) || (page.Next != 0 && page.Next != page.Jobs[1].ID) {
			t.Fatalf("job page %+v: Next must be the last ID of a full page, 0 otherwise", page)
		}
		if page.Next == 0 {
			break
		}
		after = page.Next
	}
	if !slices.Equal(jobs, wantJobs) || pages != 3 {
		t.Fatalf("paged jobs %v in %d pages; want %v in 3", jobs, pages, wantJobs)
	}

	var resources []string
	for after := ""; ; {
		page, err := q.ListResources(ctx, baton.ResourceListParams{Prefix: "r/", After: after, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Resources {
			resources = append(resources, r.Key)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if want := []string{"r/0", "r/1", "r/2", "r/3", "r/4"}; !slices.Equal(resources, want) {
		t.Fatalf("paged resources %v; want %v", resources, want)
	}
	if _, err := q.ListJobs(ctx, baton.JobListParams{Limit: -1}); !isInvalid(err, "limit") {
		t.Fatalf("ListJobs with a negative limit: %v", err)
	}

	locker, err := baton.NewLocker(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"l/1", "l/2"} {
		lease, err := locker.TryAcquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(ctx)
	}
	page, err := locker.ListLeases(ctx, baton.LeaseListParams{Prefix: "l/", Limit: 2})
	if err != nil || len(page.Leases) != 2 || page.Next != "l/2" {
		t.Fatalf("full lease page = %+v, %v; want l/1, l/2 and Next l/2", page, err)
	}
	if page, err = locker.ListLeases(ctx, baton.LeaseListParams{Prefix: "l/", After: page.Next}); err != nil ||
		len(page.Leases) != 0 || page.Next != "" {
		t.Fatalf("page after the last = %+v, %v; want empty", page, err)
	}
}
