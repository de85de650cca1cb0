package store

import "context"

// NoAudit is the Events of a store that keeps no audit log (Capabilities.Audit false): it lists
// nothing, after the checks every store makes (ErrClosed once closed, then the arguments). Embed
// it in the store, made by NewNoAudit from the store's closed flag.
type NoAudit struct{ closed *Closed }

// NewNoAudit returns the NoAudit of a store whose closed flag is closed.
func NewNoAudit(closed *Closed) NoAudit { return NoAudit{closed: closed} }

// Events returns nothing: the store keeps no audit log.
func (n NoAudit) Events(_ context.Context, p *EventsParams) ([]*Event, error) {
	if err := n.closed.Check(); err != nil {
		return nil, err
	}
	return nil, p.Validate()
}
