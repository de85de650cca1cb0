-- Limit slots (store.Lease.Slots): a unit of a limit of capacity N is one of the slots 0..N-1,
-- the lowest free at its grant, so that a resource can fence each slot as a key. NULL for the
-- holds of keys. The index finds a limit's live units by slot.
ALTER TABLE holds ADD COLUMN slot INTEGER;
CREATE INDEX holds_slots ON holds (key, slot) WHERE slot IS NOT NULL;
