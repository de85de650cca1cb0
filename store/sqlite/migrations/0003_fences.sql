-- Fences for resources outside the store (store.Fencer, `baton fence check`): the greatest
-- fencing token presented per resource. The table is package fence's (fence.DDL), so that
-- fence.Check can run on it unchanged.
CREATE TABLE IF NOT EXISTS baton_fences (
    resource TEXT   PRIMARY KEY,
    token    BIGINT NOT NULL CHECK (token > 0)
);
