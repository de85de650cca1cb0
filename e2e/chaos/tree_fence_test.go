package chaos

import "strings"

// treeKeys are the keys of one tree, as the store defines them: the root (the prefix without
// its "/") and every key that starts with the prefix; "/" separates levels.
type treeKeys string

// has reports whether key is a key of the tree (its root included).
func (p treeKeys) has(key string) bool {
	return p != "" && (key == strings.TrimSuffix(string(p), "/") || strings.HasPrefix(key, string(p)))
}

// ancestors are key's ancestors in the tree, the root first.
func (p treeKeys) ancestors(key string) []string {
	root := strings.TrimSuffix(string(p), "/")
	rest, ok := strings.CutPrefix(key, string(p))
	if !ok {
		return nil // the root, or no key of the tree
	}
	levels := strings.Split(rest, "/")
	out := []string{root}
	for i := 1; i < len(levels); i++ {
		out = append(out, string(p)+strings.Join(levels[:i], "/"))
	}
	return out
}

// related reports whether two keys of the tree are equal or one is an ancestor of the other
// (siblings and cousins are not).
func related(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// treeMode is a mode on one key of a tree: held (shared, exclusive) or an intention on an
// ancestor of the key held (intent-shared, intent-exclusive).
type treeMode int

const (
	modeIS treeMode = iota
	modeIX
	modeS
	modeX
)

// compatible is the matrix of intention locks (IS/IX/S/X) that trees follow.
func (a treeMode) compatible(b treeMode) bool {
	switch {
	case a == modeX || b == modeX:
		return false
	case a == modeIS || b == modeIS:
		return true
	default:
		return a == b // S with S, IX with IX
	}
}

// treeFence is the fenced resource's fence for the keys of a tree, which fence.MemoryStore
// cannot be (it knows shared and exclusive, not intention): a call on key K with a mode
// (shared or exclusive) and a token is judged, in one step, on K in its mode and on each
// ancestor of K in the matching intention (IS for shared, IX for exclusive), as a hierarchical
// resource takes intention locks top-down. It is refused if its token is lower than the
// greatest accepted on any of those keys in a mode it cannot run beside; an accepted call
// raises those keys' marks of its modes. For a flat key (no ancestors) this is the rule of
// fence.MemoryStore: exclusive below any token, shared below an exclusive one.
type treeFence struct {
	keys  treeKeys
	marks map[string]*[4]uint64 // per key, the greatest token accepted in each mode
}

// admit judges the call and, if accepted, raises the marks. The caller serialises calls.
func (f *treeFence) admit(key string, shared bool, token uint64) bool {
	held, intent := modeX, modeIX
	if shared {
		held, intent = modeS, modeIS
	}
	type hold struct {
		key  string
		mode treeMode
	}
	holds := []hold{{key, held}}
	for _, a := range f.keys.ancestors(key) {
		holds = append(holds, hold{a, intent})
	}
	for _, h := range holds {
		if m := f.marks[h.key]; m != nil {
			for other, mark := range m {
				if !h.mode.compatible(treeMode(other)) && token < mark {
					return false
				}
			}
		}
	}
	for _, h := range holds {
		m := f.marks[h.key]
		if m == nil {
			m = &[4]uint64{}
			f.marks[h.key] = m
		}
		m[h.mode] = max(m[h.mode], token)
	}
	return true
}
