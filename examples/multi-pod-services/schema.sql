-- The service's own database (SQLite in the example; the same in PostgreSQL).
-- resources: what the jobs change. token is the fencing token of the last write: a write with a
-- token not greater than it is refused by its WHERE clause.
CREATE TABLE resources (id TEXT PRIMARY KEY, applied TEXT NOT NULL DEFAULT '', token INTEGER NOT NULL DEFAULT 0);
-- What the example records to check itself.
CREATE TABLE submits (pod TEXT, idem_key TEXT, job_id INTEGER, existing INTEGER);
CREATE TABLE runs (pod TEXT, job_id INTEGER, resource TEXT, op TEXT, token INTEGER, start REAL, end REAL);
