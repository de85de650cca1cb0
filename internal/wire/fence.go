package wire

// FenceCheckRequest is the body of POST /v1/fences/check.
type FenceCheckRequest struct {
	Resource string `json:"resource"`
	Token    uint64 `json:"token"`
}

// FenceCheckResponse answers a check that passed: Token is now the resource's fence.
type FenceCheckResponse struct {
	Resource string `json:"resource"`
	Token    uint64 `json:"token"`
}

// FenceResetResponse answers DELETE /v1/fences/{resource}: the resource's fence is gone, and
// Token is the token it held.
type FenceResetResponse struct {
	Resource string `json:"resource"`
	Token    uint64 `json:"token"`
}
