package peers

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cpuMeter reads the CPU time (user + sys, from /proc) of this process and of the PostgreSQL
// server: the postmaster and every child of it (backends, WAL writer, checkpointer). On a shared
// 2-core machine, CPU time per job is a steadier measure of what a design costs than wall time;
// the server's part is only attributable on a server the benchmark has to itself.
type cpuMeter struct {
	postmaster int
}

func newCPUMeter(b *testing.B, pool *pgxpool.Pool) *cpuMeter {
	b.Helper()
	var backend int
	if err := pool.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		b.Fatal(err)
	}
	ppid, _, ok := procStat(backend)
	if !ok {
		return &cpuMeter{} // not on this machine (a remote server): only this process is measured
	}
	return &cpuMeter{postmaster: ppid}
}

// read returns this process's and the server's CPU seconds so far.
func (m *cpuMeter) read() (self, server float64) {
	_, self, _ = procStat(os.Getpid())
	if m.postmaster == 0 {
		return self, 0
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, cpu, ok := procStat(pid); ok && (ppid == m.postmaster || pid == m.postmaster) {
			server += cpu
		}
	}
	// Backends that ended since the last reading (a client's connections closed) are no longer
	// listed; the postmaster has reaped them, and their CPU is in its children's time.
	server += reapedCPU(m.postmaster)
	return self, server
}

// reapedCPU is the CPU seconds of a process's ended and reaped children (cutime + cstime).
func reapedCPU(pid int) float64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0
	}
	cut, _ := strconv.ParseFloat(f[13], 64)
	cst, _ := strconv.ParseFloat(f[14], 64)
	return (cut + cst) / 100
}

// procStat returns a process's parent and its CPU seconds (utime + stime) from /proc/PID/stat.
func procStat(pid int) (ppid int, cpu float64, ok bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces: split after it.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	const ticks = 100 // USER_HZ on Linux
	return ppid, (ut + st) / ticks, true
}
