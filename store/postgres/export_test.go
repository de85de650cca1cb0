package postgres

// ListenerPID is the backend PID of s's LISTEN connection.
func ListenerPID(s *Store) uint32 { return s.lis.pid.Load() }

// ListenerConnects counts the LISTEN connections s has established; a reconnect is counted after
// its wake-up of all subscribers was sent.
func ListenerConnects(s *Store) uint64 { return s.lis.connects.Load() }

// ChannelName exposes the NOTIFY channel naming rule.
var ChannelName = channelName
