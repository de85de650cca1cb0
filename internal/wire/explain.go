package wire

import (
	"github.com/batonhq/baton"
	"github.com/batonhq/baton/store"
)

// Explanation is the body of GET /v1/resources/{key}/explain and GET /v1/jobs/{id}/explain: why
// the resource would not be granted now, or why the job does not run now. No reasons: nothing
// holds it back.
type Explanation struct {
	Key      string       `json:"key"`
	Job      int64        `json:"job,omitempty"`
	JobState string       `json:"job_state,omitempty"`
	Reasons  []WaitReason `json:"reasons"`
}

// WaitReason is one reason (baton.WaitReason): code, a sentence, and the parts of its code.
type WaitReason struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Holder  string   `json:"holder,omitempty"`
	Job     int64    `json:"job,omitempty"`
	Token   uint64   `json:"token,omitempty"`
	Until   *Time    `json:"until,omitempty"`
	Ahead   int      `json:"ahead,omitempty"`
	Rest    string   `json:"rest,omitempty"`
	State   *string  `json:"state,omitempty"`
	Allowed []string `json:"allowed,omitempty"`
	// held: the extra resource of a job that holds it back, and whether it is held shared;
	// limit: the full limit, its units in use and capacity.
	Resource string `json:"resource,omitempty"`
	Shared   bool   `json:"shared,omitempty"`
	Limit    string `json:"limit,omitempty"`
	InUse    int    `json:"in_use,omitempty"`
	Capacity int    `json:"capacity,omitempty"`
	// rate: the rate reached ("3/1h"); until is when its window frees.
	Rate string `json:"rate,omitempty"`
}

// ExplanationFrom converts an explanation for the wire.
func ExplanationFrom(e *baton.Explanation) Explanation {
	out := Explanation{Key: e.Key, Job: e.Job, JobState: string(e.JobState), Reasons: make([]WaitReason, len(e.Reasons))}
	for i, r := range e.Reasons {
		w := WaitReason{Code: r.Code, Message: r.Message, Holder: r.Holder, Job: r.Job, Token: r.Token, Ahead: r.Ahead,
			Rest: r.Rest, Allowed: r.Allowed, Resource: r.Resource, Shared: r.Shared, Limit: r.Limit, InUse: r.InUse,
			Capacity: r.Capacity, Rate: r.Rate}
		if !r.Until.IsZero() {
			t := T(r.Until)
			w.Until = &t
		}
		if r.Code == baton.WaitGuard {
			state := r.State
			w.State = &state
		}
		out.Reasons[i] = w
	}
	return out
}

// Baton converts a wire explanation back (the HTTP client's answer).
func (e Explanation) Baton() *baton.Explanation {
	out := &baton.Explanation{Key: e.Key, Job: e.Job, JobState: store.JobState(e.JobState)}
	for _, r := range e.Reasons {
		b := baton.WaitReason{Code: r.Code, Message: r.Message, Holder: r.Holder, Job: r.Job, Token: r.Token,
			Ahead: r.Ahead, Rest: r.Rest, Allowed: r.Allowed, Resource: r.Resource, Shared: r.Shared, Limit: r.Limit,
			InUse: r.InUse, Capacity: r.Capacity, Rate: r.Rate}
		if r.Until != nil {
			b.Until = r.Until.Time
		}
		if r.State != nil {
			b.State = *r.State
		}
		out.Reasons = append(out.Reasons, b)
	}
	return out
}
