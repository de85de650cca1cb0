-- Limit slots (store.Lease.Slots): a unit of a limit of capacity N is one of the slots 0..N-1,
-- the lowest free at its grant, so that a resource can fence each slot as a key. NULL for the
-- holds of keys. The index finds a limit's units not ended by slot (ended ones stay until the
-- cleaner takes them, and would make each probe longer).
ALTER TABLE holds ADD COLUMN slot INTEGER;
CREATE INDEX holds_slots ON holds (key, slot) WHERE slot IS NOT NULL AND ended = 0;
