-- Trees (store/trees.go): an admin opts a key prefix into a tree. The table is tiny; every grant
-- finds its key's tree with one probe of its primary key (store.TreeProbe).
CREATE TABLE trees (
    prefix TEXT    NOT NULL PRIMARY KEY, -- ends with '/'; the tree's root is the prefix without it
    set_at INTEGER NOT NULL
) WITHOUT ROWID;

-- A leases row of a tree key (a lease, or the summary of a key's holds) has tree = 1, set by the
-- grant (and by SetTree on the rows that exist, cleared by DeleteTree). The partial index lists
-- those rows that may refuse a related grant: live, or resting after an expiry or a
-- force-release (lock-delay); a clean release (ended = 1) leaves it. A grant reads a key's
-- descendants as one range of it, not the tree's tombstones; a flat key's writes never touch it.
ALTER TABLE leases ADD COLUMN tree INTEGER NOT NULL DEFAULT 0;
CREATE INDEX leases_tree_live ON leases (key, available_at) WHERE tree AND ended <> 1;

-- The holds not ended, by key: a shared request reads its descendants' exclusive holds as one
-- range of it, not the ended holds the cleaner has yet to delete (nor the units of limits).
CREATE INDEX holds_live ON holds (key, mode, expires_at) WHERE ended = 0 AND mode <> 'unit';
