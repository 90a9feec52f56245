#!/usr/bin/env python3
"""Runs a command (its output discarded) and prints the peak of its whole process tree's memory
in MiB: fluxplan and its kustomize workers together, which `/usr/bin/time`'s maximum of single
processes does not show. Each process counts its proportional set size (PSS), so the library's
pages that the workers share are counted once, not once per worker. Sampled from /proc every
20 ms, so a peak shorter than that can be missed. Usage: peak-rss.py COMMAND [ARG...]"""
import os
import subprocess
import sys
import time

def tree(root):
    """The pids of `root` and all its descendants."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def proportional(pid):
    """The process's PSS in bytes (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
peak = 0
while proc.poll() is None:
    peak = max(peak, sum(proportional(pid) for pid in tree(proc.pid)))
    time.sleep(0.02)
if proc.returncode != 0:
    sys.exit(f"{sys.argv[1]} failed with exit code {proc.returncode}")
print(peak >> 20)
