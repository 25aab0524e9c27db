"""What the Python benchmarks read of a process in /proc (0 when it is gone)."""

import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process (its threads included), 0 when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


def status_kib(pid, field):
    """A kB field of /proc/PID/status (VmRSS, VmHWM, Threads...) as an integer."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
