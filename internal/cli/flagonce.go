package cli

import (
	"flag"
	"fmt"
)

// onceValue refuses a second value for a flag that takes one, which the flag package would
// otherwise let overwrite the first in silence (--state a --state b listing only b).
type onceValue struct {
	flag.Value
	name string
	set  bool
}

func (o *onceValue) Set(v string) error {
	if o.set {
		return fmt.Errorf("%s is given twice; it takes one value", dashed(cliFlag{name: o.name}))
	}
	o.set = true
	return o.Value.Set(v)
}

// Get returns the wrapped flag's value (flag.Getter), so that code reading a flag's type, such
// as serve's rules for its environment variables, sees through the wrapper.
func (o *onceValue) Get() any {
	if g, ok := o.Value.(flag.Getter); ok {
		return g.Get()
	}
	return nil
}

// onceFlags makes every flag of fs that takes one value refuse a repeat. Switches (a repeated
// --yes is harmless) and flags that take several values (listFlag, worker's --kind) keep theirs.
func onceFlags(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		switch v := f.Value.(type) {
		case *listFlag, *kindsFlag, *onceValue:
			return
		case interface{ IsBoolFlag() bool }:
			if v.IsBoolFlag() {
				return
			}
		}
		f.Value = &onceValue{Value: f.Value, name: f.Name}
	})
}
