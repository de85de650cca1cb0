package peers

import "testing"

// TestCheckJobRecs: the check the Node.js comparisons apply to every system's records finds each
// kind of violation, and none in a clean run.
func TestCheckJobRecs(t *testing.T) {
	clean := []jobRec{
		{K: 0, S: 0, A: 1, B: 2, N: 1}, {K: 0, S: 1, A: 2, B: 3, N: 1}, {K: 0, S: 2, A: 5, B: 6, N: 1},
		{K: 1, S: 0, A: 1, B: 4, N: 1}, {K: 1, S: 1, A: 4, B: 5, N: 1},
	}
	if v := checkJobRecs(clean); v.total() != 0 {
		t.Fatalf("clean run: %s", v)
	}
	for _, tc := range []struct {
		name string
		recs []jobRec
		want jobViolations
	}{
		{"overlap", []jobRec{{K: 0, S: 0, A: 1, B: 3, N: 1}, {K: 0, S: 1, A: 2, B: 4, N: 1}, {K: 1, S: 0, A: 2, B: 4, N: 1}},
			jobViolations{overlap: 1}},
		{"order", []jobRec{{K: 0, S: 0, A: 3, B: 4, N: 1}, {K: 0, S: 1, A: 1, B: 2, N: 1}}, jobViolations{order: 1}},
		{"missing", []jobRec{{K: 0, S: 0, A: 1, B: 2, N: 1}, {K: 0, S: 1, A: -1, B: -1}}, jobViolations{missing: 1}},
		{"rerun", []jobRec{{K: 0, S: 0, A: 1, B: 2, N: 2}}, jobViolations{reruns: 1}},
	} {
		if got := checkJobRecs(tc.recs); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}
