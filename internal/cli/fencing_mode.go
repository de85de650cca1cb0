package cli

// fencingModeShared tells the CMD of a shared lease or job attempt to present its token as a
// shared holder's (fence.HeaderFromEnv sends it as the Baton-Fencing-Mode header): a fence
// refuses a shared holder only for a greater exclusive token, since shared holders' tokens
// interleave. An exclusive holder's CMD gets no BATON_FENCING_MODE.
const fencingModeShared = "BATON_FENCING_MODE=shared"
