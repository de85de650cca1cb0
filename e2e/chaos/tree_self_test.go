package chaos

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/batonhq/baton/fence"
)

// checkTree catches crafted overlaps of related keys (an exclusive parent beside a child, a
// shared parent beside an exclusive child, and the other way round), stale tokens accepted
// on a related key, and passes legal histories (a shared parent beside a shared child, two
// children exclusive at once, keys outside the tree).
func TestTreeCheckCatchesViolations(t *testing.T) {
	const (
		root = "t"
		p    = "t/p"
		c1   = "t/p/c1"
		c2   = "t/p/c2"
		sh   = true
		ex   = false
	)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ev := func(at int, kind, key, run string, token uint64, shared, accepted bool) event {
		mode := ""
		if shared {
			mode = "shared"
		}
		return event{At: ms(at), Kind: kind, Key: key, Mode: mode, Client: "c-" + run, Run: run, Token: token, Accepted: accepted}
	}
	cases := []struct {
		name    string
		events  []event
		stalled string
		want    string
	}{
		{"shared parent beside a shared child", []event{
			ev(0, "enter", p, "a", 5, sh, true), ev(10, "enter", c1, "b", 6, sh, true),
			ev(20, "write", p, "a", 5, sh, true), ev(30, "exit", c1, "b", 6, sh, true), ev(40, "exit", p, "a", 5, sh, true),
		}, "", ""},
		{"two children exclusive at once", []event{
			ev(0, "enter", c1, "a", 5, ex, true), ev(10, "enter", c2, "b", 6, ex, true),
			ev(20, "write", c1, "a", 5, ex, true), ev(30, "exit", c1, "a", 5, ex, true), ev(40, "exit", c2, "b", 6, ex, true),
		}, "", ""},
		{"shared root beside a shared child, then an exclusive sibling's parent after both", []event{
			ev(0, "enter", root, "a", 5, sh, true), ev(10, "enter", c2, "b", 6, sh, true),
			ev(20, "exit", root, "a", 5, sh, true), ev(30, "exit", c2, "b", 6, sh, true),
			ev(40, "enter", p, "c", 7, ex, true), ev(50, "exit", p, "c", 7, ex, true),
		}, "", ""},
		{"exclusive parent beside a child that goes on", []event{
			ev(0, "enter", c1, "a", 5, sh, true), ev(10, "enter", p, "b", 6, ex, true),
			ev(20, "write", c1, "a", 5, sh, false),
		}, "", "tree_overlap/nofault"},
		{"child entered beside an exclusive parent that goes on", []event{
			ev(0, "enter", p, "a", 5, ex, true), ev(10, "enter", c2, "b", 6, sh, true),
			ev(20, "write", p, "a", 5, ex, true),
		}, "", "tree_accepted_late_write"},
		{"exclusive root beside a grandchild", []event{
			ev(0, "enter", c1, "a", 5, ex, true), ev(10, "enter", root, "b", 6, ex, true),
			ev(20, "exit", c1, "a", 5, ex, false),
		}, "", "tree_overlap/nofault"},
		{"shared parent beside an exclusive child", []event{
			ev(0, "enter", c1, "a", 5, ex, true), ev(10, "enter", p, "b", 6, sh, true),
			ev(20, "write", c1, "a", 5, ex, false),
		}, "", "tree_overlap/nofault"},
		{"exclusive child beside a shared parent", []event{
			ev(0, "enter", p, "a", 5, sh, true), ev(10, "enter", c1, "b", 6, ex, true),
			ev(20, "write", p, "a", 5, sh, true),
		}, "", "tree_accepted_late_write"},
		{"exclusive parent beside a stalled child, fenced out", []event{
			ev(0, "enter", c1, "a", 5, ex, true), ev(10, "enter", p, "b", 6, ex, true),
			ev(20, "write", c1, "a", 5, ex, false), ev(30, "exit", c1, "a", 5, ex, false),
		}, "a", ""},
		{"a stalled child's late write accepted", []event{
			ev(0, "enter", c1, "a", 5, ex, true), ev(10, "enter", p, "b", 6, ex, true),
			ev(20, "write", c1, "a", 5, ex, true),
		}, "a", "tree_accepted_late_write"},
		{"child entered below an exclusive parent's token", []event{
			ev(0, "enter", p, "a", 6, ex, true), ev(10, "exit", p, "a", 6, ex, true),
			ev(20, "enter", c1, "b", 5, sh, true),
		}, "", "tree_accepted_below_mark"},
		{"exclusive parent entered below a shared child's token", []event{
			ev(0, "enter", c1, "a", 6, sh, true), ev(10, "exit", c1, "a", 6, sh, true),
			ev(20, "enter", p, "b", 5, ex, true),
		}, "", "tree_accepted_below_mark"},
		{"sibling below a sibling's token", []event{
			ev(0, "enter", c1, "a", 6, ex, true), ev(10, "enter", c2, "b", 5, ex, true),
			ev(20, "exit", c2, "b", 5, ex, true), ev(30, "exit", c1, "a", 6, ex, true),
		}, "", ""},
		{"refused enter of a run not stopped", []event{
			ev(0, "enter", p, "a", 6, ex, true), ev(10, "exit", p, "a", 6, ex, true),
			ev(20, "enter", c1, "b", 5, ex, false),
		}, "", "tree_token_order/nofault"},
		{"no run ever beside another", []event{
			ev(0, "enter", p, "a", 5, ex, true), ev(10, "exit", p, "a", 5, ex, true),
			ev(20, "enter", c1, "b", 6, ex, true), ev(30, "exit", c1, "b", 6, ex, true),
		}, "", "tree_unchecked"},
		{"keys outside the tree are not judged", []event{
			ev(0, "enter", "t2/p", "a", 5, ex, true), ev(5, "enter", c1, "x", 4, ex, true), ev(10, "enter", "t2/p/c1", "b", 6, ex, true),
			ev(15, "enter", c2, "y", 7, ex, true),
			ev(20, "write", "t2/p", "a", 5, ex, true),
		}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.events {
				c.events[i].Seq = i
			}
			r, notes := &report{}, &counter{}
			checkTree(c.events, treeKeys(root+"/"), func(s *runSpan) bool { return s.run == c.stalled }, &timeline{}, time.Second, r, notes)
			got := r.violations.String()
			// A history of one call or two may leave no run beside another: tree_unchecked is
			// judged only where it is wanted.
			if c.want == "" && got != "none" && got != "tree_unchecked=1" {
				t.Errorf("violations %s, want none", got)
			}
			if c.want != "" && r.violations.get(c.want) == 0 {
				t.Errorf("violations %s, want %s", got, c.want)
			}
		})
	}
}

// The resource's tree fence judges a call on a key of the tree on the key and, as intention,
// on its ancestors: a stale child is refused once its parent was entered exclusive above its
// token, a shared parent once an exclusive child entered above its token; shared parent and
// shared child, and siblings, interleave their tokens.
func TestResourceFencesTrees(t *testing.T) {
	r := newResource(t, time.Now())
	r.setTree("t/")
	call := func(key string, token uint64, shared bool) int {
		t.Helper()
		e := event{Kind: "write", Key: key, Run: "r", Token: token}
		mode := fence.Exclusive
		if shared {
			e.Mode, mode = "shared", fence.Shared
		}
		b, _ := json.Marshal(e)
		req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		fence.HeaderMode(req, key, token, mode)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i, c := range []struct {
		key    string
		token  uint64
		shared bool
		want   int
	}{
		{"t/p/c1", 5, false, http.StatusNoContent},
		{"t/p/c2", 4, false, http.StatusNoContent}, // siblings interleave
		{"t/p", 6, true, http.StatusNoContent},     // shared parent above both children
		{"t/p/c1", 5, false, http.StatusConflict},  // an exclusive child below a shared parent
		{"t/p/c1", 3, true, http.StatusConflict},   // below the exclusive child of its key
		{"t/p/c3", 3, true, http.StatusNoContent},  // a shared child below a shared parent
		{"t", 7, false, http.StatusNoContent},
		{"t/p", 6, true, http.StatusConflict},    // below the exclusive root
		{"t/p/c2", 6, true, http.StatusConflict}, // a grandchild below it
		{"t/p/c2", 8, false, http.StatusNoContent},
		{"t", 7, false, http.StatusConflict}, // the root below a grandchild
		{"t2/p", 1, false, http.StatusNoContent},
	} {
		if got := call(c.key, c.token, c.shared); got != c.want {
			t.Fatalf("call %d (%s token %d shared %v): %d, want %d", i, c.key, c.token, c.shared, got, c.want)
		}
	}
	if n := len(r.snapshot()); n != 12 {
		t.Fatalf("%d calls recorded; want 12", n)
	}
}
