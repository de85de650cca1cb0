package baton

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/batonhq/baton/internal/retry"
	"github.com/batonhq/baton/store"
)

// PeriodicJob is a job the maintenance leader submits at the start of every period of its
// schedule. Each period's job carries the idempotency key "periodic:<Name>:<period start, Unix
// seconds>", so that however many runners submit it, and across leader changes, each period
// gets one job.
type PeriodicJob struct {
	// Name identifies the periodic job in its idempotency keys: keep it stable.
	Name string
	// Schedule is a standard 5-field cron expression ("*/15 * * * *"), a descriptor ("@hourly",
	// "@daily") or "@every <duration>" (whole seconds, at least 1s). Schedules are read in UTC
	// unless they start with "CRON_TZ=<zone> ". "@every d" periods start at multiples of d since
	// the Unix epoch, so every runner computes the same period starts.
	Schedule string
	Kind     string
	Resource string
	Args     json.RawMessage
	Policy   BusyPolicy // "" means the kind's
	Priority int
}

// periodic is a PeriodicJob with its parsed schedule and the period it will submit next.
type periodic struct {
	job   PeriodicJob
	sched cron.Schedule
	// period is the start of the next period to submit; at is when to try (period, or a retry).
	period, at time.Time
}

// everySchedule is "@every d" with periods aligned on the Unix epoch. cron's own counts from the
// time it is asked, which differs between runners and would give each its own idempotency keys.
type everySchedule struct{ d time.Duration }

func (s everySchedule) Next(t time.Time) time.Time {
	n := t.UnixNano()
	return time.Unix(0, (n/int64(s.d)+1)*int64(s.d)).UTC()
}

// parseSchedule parses a PeriodicJob.Schedule.
func parseSchedule(spec string) (sched cron.Schedule, err error) {
	defer func() {
		// cron v3.0.1 panics on a "CRON_TZ=zone" with nothing after it.
		if p := recover(); p != nil {
			sched, err = nil, fmt.Errorf("malformed schedule %q", spec)
		}
	}()
	// cron rounds "@every 1.5s" down to whole seconds and "@every 100ms" up to 1s without a
	// word: refuse them instead, so that the period is the one written.
	if d, ok := strings.CutPrefix(spec, "@every "); ok {
		if p, err := time.ParseDuration(d); err == nil && (p < time.Second || p%time.Second != 0) {
			return nil, fmt.Errorf("@every takes whole seconds, at least 1s (got %s)", d)
		}
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, err
	}
	if every, ok := s.(cron.ConstantDelaySchedule); ok {
		return everySchedule{d: every.Delay}, nil
	}
	return s, nil
}

func parsePeriodic(jobs []PeriodicJob) ([]*periodic, error) {
	var out []*periodic
	names := make(map[string]bool)
	for i, j := range jobs {
		field := fmt.Sprintf("periodic[%d]", i)
		if j.Name == "" {
			return nil, &InvalidArgumentError{Field: field + ".name", Rule: "must not be empty"}
		}
		if names[j.Name] {
			return nil, &InvalidArgumentError{Field: field + ".name", Rule: fmt.Sprintf("must be unique (%q repeats)", j.Name)}
		}
		names[j.Name] = true
		sched, err := parseSchedule(j.Schedule)
		if err != nil {
			return nil, &InvalidArgumentError{Field: field + ".schedule", Rule: fmt.Sprintf("must be a cron expression, a descriptor or @every <duration>: %v", err)}
		}
		// The longest idempotency key this job will use must be valid, with everything else.
		p := submitParams(j, time.Unix(math.MaxInt64/int64(time.Second), 0))
		if err := p.Validate(); err != nil {
			var inv *InvalidArgumentError
			if errors.As(err, &inv) {
				return nil, &InvalidArgumentError{Field: field + "." + inv.Field, Rule: inv.Rule}
			}
			return nil, err
		}
		out = append(out, &periodic{job: j, sched: sched})
	}
	return out, nil
}

func submitParams(j PeriodicJob, period time.Time) *store.SubmitParams {
	return &store.SubmitParams{
		Kind: j.Kind, Resource: j.Resource, Args: j.Args, Policy: j.Policy, Priority: j.Priority,
		IdempotencyKey: "periodic:" + j.Name + ":" + strconv.FormatInt(period.Unix(), 10),
	}
}

// schedulePeriodic sets each job's next period after now.
func schedulePeriodic(jobs []*periodic, now time.Time) {
	for _, p := range jobs {
		p.period = p.sched.Next(now.UTC())
		p.at = p.period
	}
}

// nextPeriodic is when the earliest periodic job is due (zero if there are none, or a schedule
// never fires again).
func nextPeriodic(jobs []*periodic) time.Time {
	var next time.Time
	for _, p := range jobs {
		if !p.at.IsZero() && (next.IsZero() || p.at.Before(next)) {
			next = p.at
		}
	}
	return next
}

// submitDue submits the jobs whose period has started. A transient failure is retried about
// every second until the period is over; the runner does not catch up on periods it missed.
func (m *maintenance) submitDue(ctx context.Context, now time.Time) {
	for _, p := range m.periodic {
		if p.at.IsZero() || p.at.After(now) {
			continue
		}
		res, err := m.q.st.SubmitJob(ctx, submitParams(p.job, p.period))
		log := m.log.With("periodic", p.job.Name, "period", p.period)
		switch {
		case err == nil:
			if !res.Existing {
				log.Debug("baton: periodic job submitted", "job", res.Job.ID, "state", res.Job.State)
			}
		case errors.Is(err, ErrResourceBusy):
			log.Info("baton: periodic job rejected: its resource is busy", "err", err)
		case retry.Transient(err) && ctx.Err() == nil:
			retry := now.Add(retry.Jitter(time.Second))
			if next := p.sched.Next(p.period); next.IsZero() || retry.Before(next) {
				log.Warn("baton: submitting a periodic job failed; retrying", "err", err)
				p.at = retry
				continue
			}
			log.Error("baton: submitting a periodic job failed; skipping this period", "err", err)
		default:
			log.Error("baton: submitting a periodic job failed", "err", err)
		}
		p.period = p.sched.Next(now.UTC())
		p.at = p.period
	}
}

// ValidatePeriodic checks periodic job definitions as RunMaintenance does: an
// *InvalidArgumentError names the field at fault ("periodic[1].schedule").
func ValidatePeriodic(jobs []PeriodicJob) error {
	_, err := parsePeriodic(jobs)
	return err
}

// NextRun is when the first period of j's schedule after t starts: when the maintenance leader
// will submit its next job. It is zero if the schedule never fires again, and an error if the
// schedule is not valid.
func (j PeriodicJob) NextRun(t time.Time) (time.Time, error) {
	sched, err := parseSchedule(j.Schedule)
	if err != nil {
		return time.Time{}, &InvalidArgumentError{Field: "schedule", Rule: err.Error()}
	}
	return sched.Next(t.UTC()), nil
}
