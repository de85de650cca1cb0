package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// Trees: key prefixes under which "/" separates levels, so that a holder of a key holds its
// subtree and takes intention on its ancestors (the resources group: set-tree, delete-tree,
// trees).

const treesHelp = `Under a tree prefix such as cluster/, "/" separates levels: a holder of cluster/eu-1 (a lease
or a running job, exclusive) excludes every holder of cluster/eu-1/node/a and of cluster, and
two holders of cluster/eu-1/node/a and cluster/eu-1/node/b go together; shared holders of
related keys go together. The tree's root is the prefix without its "/" (cluster). SQLite and
PostgreSQL stores only (others: exit code 1, naming the store).`

var treeNames = flagNames{"prefix": "PREFIX"}

func (a *app) resourcesSetTreeCommand() *cobra.Command {
	cmd := a.command(&cobra.Command{
		Use:   "set-tree PREFIX [-o table|json]",
		Short: "make a key prefix a tree of parents and children (admin)",
		Long: `Make PREFIX a tree (admin role), or say it is one already. PREFIX ends with "/", has no
empty level ("a//") and lies inside no other tree, nor another inside it (exit code 2, naming
PREFIX). While a lease, a waiting lock request or an unfinished job lives on a key of the tree
(its root included), the tree is not set (exit code 4, naming the key): set it once nothing
under it is held, waited for or queued.

` + treesHelp + `

Example:
  baton resources set-tree cluster/

Output:
  tree cluster/ (root cluster) set at 2026-11-21T14:31:34Z
With -o json, the tree object (docs/http-api.md).`,
		Args: exactArgs(1, "PREFIX"),
	}, meta{exits: []int{exitOK, exitError, exitUsage, exitConflict, exitAuth}, writes: true, names: treeNames})
	a.addGlobalFlags(cmd, true)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		p := &store.SetTreeParams{Prefix: args[0], Actor: a.actor()}
		return a.call(p, func(ctx context.Context, st *client.Store) error {
			t, err := st.SetTree(ctx, p)
			if err != nil {
				return err
			}
			if a.g.output == "json" {
				return writeJSON(a.stdout, wire.TreeFrom(t))
			}
			_, err = fmt.Fprintf(a.stdout, "tree %s (root %s) set at %s\n", printable(t.Prefix), printable(t.Root), formatTime(t.SetAt))
			return err
		})
	}
	return cmd
}

func (a *app) resourcesDeleteTreeCommand() *cobra.Command {
	cmd := a.command(&cobra.Command{
		Use:   "delete-tree PREFIX",
		Short: "return a tree's keys to flat keys (admin)",
		Long: `Delete the tree PREFIX (admin role): its keys become flat keys again, each its own resource
whatever its "/". Exit code 3 if PREFIX is no tree; exit code 4, naming the key, while a
lease, a waiting lock request or an unfinished job lives on a key of the tree.

Example:
  baton resources delete-tree cluster/`,
		Args: exactArgs(1, "PREFIX"),
	}, meta{exits: []int{exitOK, exitError, exitUsage, exitNotFound, exitConflict, exitAuth}, writes: true, names: treeNames})
	a.addGlobalFlags(cmd, true)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		p := &store.DeleteTreeParams{Prefix: args[0], Actor: a.actor()}
		return a.call(p, func(ctx context.Context, st *client.Store) error {
			err := st.DeleteTree(ctx, p)
			if errors.Is(err, store.ErrNotFound) {
				return explain(err, "no tree %q", p.Prefix)
			}
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "deleted tree %s\n", printable(p.Prefix))
			return err
		})
	}
	return cmd
}

func (a *app) resourcesTreesCommand() *cobra.Command {
	var limit int
	cmd := a.command(&cobra.Command{
		Use:   "trees [--limit N] [-o table|json]",
		Short: "list trees",
		Long: `List trees in prefix order. Without --limit, every page is fetched.

` + treesHelp + `

Example:
  baton resources trees

Output (table):
  PREFIX    ROOT     SET_AT
  cluster/  cluster  2026-11-21T14:31:34Z

With -o json, a JSON array of tree objects (docs/http-api.md).`,
		Args: noArgs,
	}, meta{exits: exitsRead})
	a.addGlobalFlags(cmd, true)
	cmd.Flags().IntVar(&limit, "limit", 0, "at most `N` trees (1-1000), one page")
	cmd.RunE = func(_ *cobra.Command, _ []string) error {
		if err := checkLimit(limit); err != nil {
			return err
		}
		return a.withStore(func(ctx context.Context, st *client.Store) error {
			all, err := listPages(limit, func(after string, n int) ([]*store.Tree, error) {
				return st.Trees(ctx, &store.TreesParams{After: after, Limit: n})
			}, func(t *store.Tree) string { return t.Prefix })
			if err != nil {
				return err
			}
			if a.g.output == "json" {
				out := make([]wire.Tree, 0, len(all))
				for _, t := range all {
					out = append(out, wire.TreeFrom(t))
				}
				return writeJSON(a.stdout, out)
			}
			tw := newTable(a.stdout)
			fmt.Fprintln(tw, "PREFIX\tROOT\tSET_AT")
			for _, t := range all {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", printable(t.Prefix), printable(t.Root), formatTime(t.SetAt))
			}
			return tw.Flush()
		})
	}
	return cmd
}
