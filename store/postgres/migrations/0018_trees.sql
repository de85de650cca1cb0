-- Trees (store/trees.go, trees.go): an admin opts a key prefix into a tree. The table is tiny and
-- read by every grant: the plain acquire statement probes it once (the greatest prefix at or
-- below store.TreeProbe(key)) and grants no key of a tree; a grant through holds probes it for
-- each of its keys. Statements that read it hold ACCESS SHARE on it until they commit, and
-- SetTree and DeleteTree take ACCESS EXCLUSIVE: a change of a tree waits for every grant in
-- flight, and every grant after it sees it.
CREATE TABLE trees (
    prefix text COLLATE "C" PRIMARY KEY, -- ends with '/'; the tree's root is the prefix without it
    set_at timestamptz NOT NULL
);

-- A grant in a tree reads the tickets of its key's descendants as one range of the line's index:
-- the key must compare in byte order ("C"), as the keys of leases, holds and jobs do. Equality
-- is the same in every deterministic collation, so the existing statements read as before.
ALTER TABLE tickets ALTER COLUMN key TYPE text COLLATE "C";

-- A job whose resource is a key of a tree (store.Job.Tree) is granted through holds (holds is
-- true), by the tree's rules.
ALTER TABLE jobs ADD COLUMN tree boolean NOT NULL DEFAULT false;
