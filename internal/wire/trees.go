package wire

import "github.com/batonhq/baton/store"

// Trees (store.Treer): key prefixes under which "/" separates levels, so that a holder of a key
// holds its subtree and takes intention on its ancestors.

// SetTreeRequest is the optional body of PUT /v1/trees/{prefix}. Actor counts only on a server
// without auth; with auth the token's name is recorded.
type SetTreeRequest struct {
	Actor string `json:"actor,omitempty"`
}

// Tree is the tree object.
type Tree struct {
	// Prefix ends with "/"; Root is the prefix without it, the ancestor of every key of the tree.
	Prefix string `json:"prefix"`
	Root   string `json:"root"`
	SetAt  Time   `json:"set_at"`
}

// TreeFrom converts a store tree.
func TreeFrom(t *store.Tree) Tree {
	return Tree{Prefix: t.Prefix, Root: t.Root, SetAt: T(t.SetAt)}
}

// Store converts back to a store tree.
func (t *Tree) Store() *store.Tree {
	return &store.Tree{Prefix: t.Prefix, Root: t.Root, SetAt: t.SetAt.UTC()}
}

// TreeResponse answers PUT and GET /v1/trees/{prefix}.
type TreeResponse struct {
	Tree Tree `json:"tree"`
}

// TreesResponse answers GET /v1/trees; NextCursor (the last prefix) is set when the page is
// full: pass it as cursor.
type TreesResponse struct {
	Trees      []Tree `json:"trees"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// DeleteTreeResponse answers DELETE /v1/trees/{prefix}.
type DeleteTreeResponse struct {
	Prefix  string `json:"prefix"`
	Deleted bool   `json:"deleted"`
}
