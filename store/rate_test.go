package store

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestRateText(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Rate
		text string
	}{
		{"3/1h", Rate{3, time.Hour}, "3/1h"},
		{"10/30s", Rate{10, 30 * time.Second}, "10/30s"},
		{"1/1d", Rate{1, 24 * time.Hour}, "1/1d"},
		{"5/90m", Rate{5, 90 * time.Minute}, "5/90m"},
		{"2/1h30m", Rate{2, 90 * time.Minute}, "2/90m"},
		{"2/1500ms", Rate{2, 1500 * time.Millisecond}, "2/1.5s"},
		{"1000000/30d", Rate{MaxRateMax, MaxRateWindow}, "1000000/30d"},
	} {
		got, err := ParseRate("rate", c.in)
		if err != nil || got != c.want || got.String() != c.text {
			t.Errorf("ParseRate(%q) = %v (%s), %v; want %v, %s", c.in, got, got.String(), err, c.want, c.text)
		}
		if back, err := ParseRate("rate", got.String()); err != nil || back != got {
			t.Errorf("ParseRate(%q) = %v, %v; want %v back", got.String(), back, err, got)
		}
	}
	for _, c := range []struct{ in, field string }{
		{"3", "rate"}, {"x/1h", "rate.max"}, {"3/1y", "rate.window"}, {"3/", "rate.window"},
		{"0/1h", "rate.max"}, {"1000001/1h", "rate.max"}, {"3/999ms", "rate.window"}, {"3/31d", "rate.window"},
		{"-1/1h", "rate.max"}, {"3/-1h", "rate.window"},
	} {
		_, err := ParseRate("rate", c.in)
		var inv *InvalidArgumentError
		if !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("ParseRate(%q) = %v; want an invalid argument on %s", c.in, err, c.field)
		}
	}
	var k struct{ Rate *Rate }
	if err := json.Unmarshal([]byte(`{"Rate":"3/1h"}`), &k); err != nil || k.Rate == nil || *k.Rate != (Rate{3, time.Hour}) {
		t.Errorf("JSON %v, %v", k.Rate, err)
	}
	if b, err := json.Marshal(Rate{3, time.Hour}); err != nil || string(b) != `"3/1h"` {
		t.Errorf("Marshal = %s, %v", b, err)
	}
}

func TestRateNext(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := Rate{Max: 2, Window: 10 * time.Second}
	at := func(s ...int) []time.Time {
		var out []time.Time
		for _, v := range s {
			out = append(out, t0.Add(time.Duration(v)*time.Second))
		}
		return out
	}
	for _, c := range []struct {
		grants  []time.Time
		now     int
		reached bool
		next    int
	}{
		{nil, 0, false, 0},
		{at(0), 1, false, 0},
		{at(0, 5), 6, true, 10},
		{at(0, 5), 10, false, 0},     // the grant at 0 left the window (10s ago exactly)
		{at(-20, 0, 5), 6, true, 10}, // older grants are ignored
		{at(0, 5, 7), 8, true, 15},   // three in the window (a lowered Max): the 2nd newest + W
		{at(0, 5, 12), 6, true, 15},  // a later grant (a transaction that started later) counts
	} {
		next, reached := RateNext(r, c.grants, t0.Add(time.Duration(c.now)*time.Second))
		if reached != c.reached || reached && !next.Equal(t0.Add(time.Duration(c.next)*time.Second)) {
			t.Errorf("RateNext(%v, now %d) = %v, %v; want %v, %d", c.grants, c.now, next, reached, c.reached, c.next)
		}
	}
}
