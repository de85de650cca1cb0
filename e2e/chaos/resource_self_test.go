package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/fence"
)

// The fenced resource refuses (409) a lower token than it has seen for the key, records both
// calls with the right Accepted, and refuses a call whose headers disagree with its body.
func TestResourceFencesThroughTheMiddleware(t *testing.T) {
	r := newResource(t, time.Now())
	call := func(e event, headerToken uint64) int {
		t.Helper()
		b, _ := json.Marshal(e)
		req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		fence.Header(req, e.Key, headerToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := call(event{Kind: "enter", Key: "k", Run: "b", Token: 5}, 5); got != http.StatusNoContent {
		t.Fatalf("token 5 enter: %d", got)
	}
	if got := call(event{Kind: "write", Key: "k", Run: "a", Token: 4}, 4); got != http.StatusConflict {
		t.Fatalf("token 4 write after 5: %d; want 409", got)
	}
	if got := call(event{Kind: "write", Key: "other", Run: "c", Token: 4}, 4); got != http.StatusNoContent {
		t.Fatalf("token 4 on another key: %d", got)
	}
	if got := call(event{Kind: "write", Key: "k", Run: "a", Token: 4}, 6); got != http.StatusBadRequest {
		t.Fatalf("header token 6, body token 4: %d; want 400", got)
	}
	ev := r.snapshot()
	if len(ev) != 3 || !ev[0].Accepted || ev[1].Accepted || ev[1].Token != 4 || !ev[2].Accepted {
		t.Fatalf("recorded %+v; want token 5 accepted, token 4 on k refused, token 4 on other accepted", ev)
	}
}

// The resource's fence knows modes: a shared call is refused only below an exclusive token, an
// exclusive one below any token; a mode header that disagrees with the body is refused (400).
func TestResourceFencesModes(t *testing.T) {
	r := newResource(t, time.Now())
	call := func(e event, headerMode fence.Mode) int {
		t.Helper()
		b, _ := json.Marshal(e)
		req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		fence.HeaderMode(req, e.Key, e.Token, headerMode)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	shared := func(run string, token uint64) event {
		return event{Kind: "enter", Key: "k", Mode: "shared", Run: run, Token: token}
	}
	excl := func(run string, token uint64) event { return event{Kind: "enter", Key: "k", Run: run, Token: token} }
	for i, c := range []struct {
		e      event
		header fence.Mode
		want   int
	}{
		{shared("a", 5), fence.Shared, http.StatusNoContent},
		{shared("b", 4), fence.Shared, http.StatusNoContent}, // shared tokens interleave
		{excl("c", 3), fence.Exclusive, http.StatusConflict},
		{excl("d", 6), fence.Exclusive, http.StatusNoContent},
		{shared("e", 5), fence.Shared, http.StatusConflict},
		{shared("f", 7), fence.Exclusive, http.StatusBadRequest}, // body shared, header not
		{excl("g", 8), fence.Shared, http.StatusBadRequest},
	} {
		if got := call(c.e, c.header); got != c.want {
			t.Fatalf("call %d (%+v, header %s): %d, want %d", i, c.e, c.header, got, c.want)
		}
	}
	var accepted []string
	for _, e := range r.snapshot() {
		accepted = append(accepted, fmt.Sprintf("%s:%v", e.Run, e.Accepted))
	}
	if got := strings.Join(accepted, " "); got != "a:true b:true c:false d:true e:false" {
		t.Fatalf("recorded %s", got)
	}
}
