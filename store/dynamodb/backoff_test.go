package dynamodb

import (
	"testing"
	"time"
)

// The backoff between attempts is uniformly random in [0, ceiling], the ceiling doubling from
// the base per attempt and capped at the maximum (Config.MaxBackoff), also for attempt numbers
// so large that base<<attempt would overflow. The draws are checked against the bounds, and
// their largest and mean against what a uniform draw makes all but certain (2000 draws: the
// largest below 90% of the ceiling has probability 0.9^2000; the mean outside [0.4, 0.6] of the
// ceiling is more than 15 standard deviations off), so a ceiling that does not grow, or a
// constant delay, fails too.
func TestJitterBackoff(t *testing.T) {
	const draws = 2000
	for _, j := range []jitter{
		{base: 25 * time.Millisecond, max: time.Second}, // Open's, with the default MaxBackoff
		{base: 25 * time.Millisecond, max: 300 * time.Millisecond},
	} {
		for _, attempt := range []int{0, 1, 2, 3, 4, 5, 6, 7, 29, 30, 31, 62, 63, 64, 1000} {
			want := j.max
			if attempt < 10 { // 25 ms × 2^10 is past every cap here
				want = min(j.base*time.Duration(1<<attempt), j.max)
			}
			var largest, sum time.Duration
			for range draws {
				d, err := j.BackoffDelay(attempt, nil)
				if err != nil {
					t.Fatalf("max %s, attempt %d: %v", j.max, attempt, err)
				}
				if d < 0 || d > want {
					t.Fatalf("max %s, attempt %d: delay %s outside [0, %s]", j.max, attempt, d, want)
				}
				largest = max(largest, d)
				sum += d
			}
			if largest < want*9/10 {
				t.Errorf("max %s, attempt %d: largest of %d delays %s, want near the ceiling %s",
					j.max, attempt, draws, largest, want)
			}
			if mean := sum / draws; mean < want*4/10 || mean > want*6/10 {
				t.Errorf("max %s, attempt %d: mean delay %s, want about half the ceiling %s",
					j.max, attempt, mean, want)
			}
		}
	}
}
