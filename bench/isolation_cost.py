"""What confining a rehearsal's restore children costs (drtool.rehearsal.confine), per rehearsal and per child.

    python bench/isolation_cost.py [--runs 20]

Needs root and iproute2 (a network namespace). Three ways a child is started, taking turns so that load on
the machine falls on each alike: on the host; inside the rehearsal's network namespace alone (what 84b657c
did); inside the namespace with the children confined (own mount namespace, host sockets covered, no
capabilities after exec). Ten children of each kind per turn: ``/bin/true`` (the exec itself) and
``python -c pass`` (a restore step's start-up begins with one). Also timed: entering the confinement (the
mount namespace, ``/dev``, the covered sockets), which a rehearsal pays once. Medians and fastest, in
milliseconds, printed as Markdown.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

from drtool.rehearsal import confine, netns

BATCH = 10  # children started per entry, one way after another
CHILDREN = {"/bin/true": ["/bin/true"], "python -c pass": [sys.executable, "-c", "pass"]}


def spawn_ms(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    sockets = confine.host_sockets()
    ways: dict[str, Callable[[str], contextlib.AbstractContextManager[None]]] = {
        "host": lambda _name: contextlib.nullcontext(),
        "namespace only (84b657c)": netns.entered,
        "namespace + confined": lambda name: _confined(name, sockets),
    }
    times: dict[tuple[str, str], list[float]] = {(w, c): [] for w in ways for c in CHILDREN}
    setup: list[float] = []
    with netns.namespace() as name:
        for _ in range(runs):
            for way, enter in ways.items():
                started = time.perf_counter()
                with enter(name):
                    if way.endswith("confined"):
                        setup.append((time.perf_counter() - started) * 1000)
                    for child, argv in CHILDREN.items():
                        times[way, child] += [spawn_ms(argv) for _ in range(BATCH)]
    print(f"{runs} runs of {BATCH}, {len(sockets)} host sockets covered\n")
    print("| child | started | median ms | fastest ms |\n| --- | --- | --- | --- |")
    for (way, child), values in times.items():
        print(f"| {child} | {way} | {statistics.median(values):.2f} | {min(values):.2f} |")
    print(f"\nentering the confinement (once per rehearsal): median {statistics.median(setup):.2f} ms")


@contextlib.contextmanager
def _confined(name: str, sockets: list[str]) -> Iterator[None]:
    with netns.entered(name), confine.children(sockets):
        yield


if __name__ == "__main__":
    main()
