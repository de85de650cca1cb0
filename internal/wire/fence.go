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
