#!/usr/bin/env python3
"""Plots a `snapsync-bench churn --samples FILE` run: resident and sleeping rooms, the daemon's
RSS and the data directory's size over time, as one PNG (docs/benchmarks.md, "Churn").

    python3 Benchmarks/scripts/plot-churn.py SAMPLES.jsonl OUT.png [--title TEXT]

Needs matplotlib (pip install matplotlib); a benchmark tool only, never used by the tests.
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples")
    parser.add_argument("out")
    parser.add_argument("--title", default="snapsync-bench churn")
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.samples) if line.strip()]
    t = [r["t"] for r in rows]
    fig, (rooms_ax, mem_ax) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    rooms_ax.plot(t, [r["created"] for r in rows], label="rooms created")
    rooms_ax.plot(t, [r["rooms_sleeping"] for r in rows], label="sleeping (on disk only)")
    rooms_ax.plot(t, [r["rooms"] for r in rows], label="resident (in memory)")
    rooms_ax.set_ylabel("rooms")
    rooms_ax.legend(loc="upper left")
    rooms_ax.grid(alpha=0.3)
    rooms_ax.set_title(args.title)
    mib = 1 << 20
    mem_ax.plot(t, [r["rss_bytes"] / mib for r in rows], label="snapsyncd RSS", color="tab:red")
    mem_ax.set_ylabel("RSS (MiB)", color="tab:red")
    mem_ax.set_ylim(bottom=0)
    mem_ax.grid(alpha=0.3)
    disk_ax = mem_ax.twinx()
    disk_ax.plot(t, [r["data_bytes"] / mib for r in rows], label="data directory on disk", color="tab:blue")
    disk_ax.set_ylabel("data directory (MiB)", color="tab:blue")
    disk_ax.set_ylim(bottom=0)
    mem_ax.set_xlabel("seconds")
    lines = mem_ax.get_lines() + disk_ax.get_lines()
    mem_ax.legend(lines, [line.get_label() for line in lines], loc="upper left")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
