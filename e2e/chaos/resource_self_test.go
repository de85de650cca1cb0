package chaos

import (
	"bytes"
	"encoding/json"
	"net/http"
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
