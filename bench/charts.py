"""PNG charts of one run: per-append latency by session size, history-read time by path depth."""

from __future__ import annotations

from pathlib import Path

from .harness import Result


def draw(results: list[Result], directory: str) -> list[str]:
    """Write ``append_latency.png`` and ``history_depth.png`` into ``directory``; returns the paths written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("  (charts skipped: pip install -r requirements-bench.txt for matplotlib)")
        return []
    Path(directory).mkdir(parents=True, exist_ok=True)
    written = []
    for prefix, name, xlabel, log in (
        ("1.", "append_latency.png", "session size (messages already stored)", False),
        ("3c.", "history_depth.png", "path depth (messages read)", True),
    ):
        rows = [r for r in results if r.workload.startswith(prefix) and r.series]
        databases = list(dict.fromkeys(r.database for r in rows))
        if not databases:
            continue
        fig, axes = plt.subplots(1, len(databases), figsize=(6.5 * len(databases), 4.5), squeeze=False)
        for ax, database in zip(axes[0], databases, strict=True):
            for r in (r for r in rows if r.database == database):
                xs = [x for x, _ in r.series]
                ys = [y * 1e3 for _, y in r.series]
                ax.plot(xs, ys, marker="o" if log else None, markersize=3, linewidth=1.4, label=r.impl)
            ax.set_title(f"{database}")
            ax.set_xlabel(xlabel)
            ax.set_ylabel("milliseconds" + (" (median per append)" if not log else " (median read)"))
            if log:
                ax.set_xscale("log")
                ax.set_yscale("log")
            else:
                ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle("per-append latency against session size" if not log else "history read against path depth")
        fig.tight_layout()
        path = str(Path(directory) / name)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
