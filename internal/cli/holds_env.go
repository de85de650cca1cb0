package cli

import (
	"strconv"
	"strings"
)

// holdsEnv is what CMD learns of a lease's or job attempt's holds beyond its key, besides
// BATON_FENCING_TOKEN: BATON_RESOURCES, the other keys it holds; BATON_LIMITS, the limits it
// holds a unit of; BATON_LIMIT_SLOTS, the slot of each of those units, in the same order. Names
// are newline-separated (keys and limit names hold no control characters), slots
// comma-separated. A resource fences a slot as the key fence.LimitSlotKey(name, slot).
func holdsEnv(resources, limits []string, slots map[string]int) []string {
	var env []string
	if len(resources) > 0 {
		env = append(env, "BATON_RESOURCES="+strings.Join(resources, "\n"))
	}
	if len(limits) > 0 {
		nums := make([]string, len(limits))
		for i, name := range limits {
			nums[i] = strconv.Itoa(slots[name])
		}
		env = append(env, "BATON_LIMITS="+strings.Join(limits, "\n"), "BATON_LIMIT_SLOTS="+strings.Join(nums, ","))
	}
	return env
}
