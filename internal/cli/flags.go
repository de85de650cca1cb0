package cli

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// listFlag is a flag that may be given several times (the only flags that may); with split, a
// value may also hold several separated by commas (not for resource keys, which may contain
// commas). Duplicates are dropped. With exact, values are kept as given, spaces, empty values
// and duplicates included, for the store to judge (resource keys). It is a pflag.SliceValue, so
// that completion offers it again.
type listFlag struct {
	vals  []string
	split bool
	exact bool
}

func (l *listFlag) String() string { return strings.Join(l.vals, ",") }
func (l *listFlag) Type() string   { return "strings" }

func (l *listFlag) Set(v string) error {
	if l.exact {
		l.vals = append(l.vals, v)
		return nil
	}
	parts := []string{v}
	if l.split {
		parts = strings.Split(v, ",")
	}
	for _, s := range parts {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(l.vals, s) {
			l.vals = append(l.vals, s)
		}
	}
	return nil
}

func (l *listFlag) Append(v string) error { return l.Set(v) }
func (l *listFlag) GetSlice() []string    { return slices.Clone(l.vals) }

func (l *listFlag) Replace(vals []string) error {
	l.vals = nil
	for _, v := range vals {
		if err := l.Set(v); err != nil {
			return err
		}
	}
	return nil
}

// Flag annotations, read by the completer (completer.go).
const (
	valuesAnnotation = "baton/values" // the values a flag takes
	fileAnnotation   = "baton/file"   // a flag that names a file
)

// enumFlag declares the values the flag name of cmd takes, for completion.
func enumFlag(cmd *cobra.Command, name string, values ...string) {
	_ = cmd.Flags().SetAnnotation(name, valuesAnnotation, values)
}

// fileFlag declares that the flag name of cmd names a file, for completion.
func fileFlag(cmd *cobra.Command, name string) {
	_ = cmd.Flags().SetAnnotation(name, fileAnnotation, []string{"true"})
}
