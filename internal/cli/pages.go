package cli

// listPages reads a list the way every list command does: with --limit, one page of that many;
// without, every page of listPageSize, each read after the key of the last item of the one
// before (key), until a page comes back short.
func listPages[T any](limit int, page func(after string, n int) ([]T, error), key func(T) string) ([]T, error) {
	n := limit
	if n == 0 {
		n = listPageSize
	}
	var all []T
	after := ""
	for {
		p, err := page(after, n)
		if err != nil {
			return nil, err
		}
		all = append(all, p...)
		if limit != 0 || len(p) < n {
			return all, nil
		}
		after = key(p[len(p)-1])
	}
}
