package fence

import (
	"os"
	"strconv"
	"strings"
)

// LimitSlotKey is the fence key of slot slot of limit name. A limit of capacity N has the slots
// 0..N-1; each unit granted takes one, and a later holder of a slot has a greater token than
// every earlier one (baton.Lease.Slots). A resource that fences each slot as a key, as it fences
// a lock key, admits at most N holders of the limit at once, and refuses the late call of a
// holder whose unit expired and went to another.
func LimitSlotKey(name string, slot int) string { return name + "#" + strconv.Itoa(slot) }

// LimitSlotKeysFromEnv returns the fence keys (LimitSlotKey) of the limit units held by the
// lease or job attempt that `baton run` or `baton worker` runs this process under, from
// BATON_LIMITS and BATON_LIMIT_SLOTS, in the order the request named the limits; none if it
// holds no unit.
func LimitSlotKeysFromEnv() ([]string, error) {
	names, nums := os.Getenv("BATON_LIMITS"), os.Getenv("BATON_LIMIT_SLOTS")
	if names == "" && nums == "" {
		return nil, nil
	}
	ns, ss := strings.Split(names, "\n"), strings.Split(nums, ",")
	if len(ns) != len(ss) {
		return nil, &InvalidArgumentError{Field: "BATON_LIMIT_SLOTS", Rule: "must hold one slot per name of BATON_LIMITS"}
	}
	keys := make([]string, len(ns))
	for i, name := range ns {
		slot, err := strconv.Atoi(ss[i])
		if err != nil || slot < 0 || name == "" {
			return nil, &InvalidArgumentError{Field: "BATON_LIMIT_SLOTS", Rule: "must be comma-separated slots (integers from 0) for non-empty BATON_LIMITS names"}
		}
		keys[i] = LimitSlotKey(name, slot)
	}
	return keys, nil
}
