"""Benchmark (not a test): where the start of a local Ray goes, and what connecting to a running one costs.

    OMP_NUM_THREADS=1 python experiments/bench_ray_start.py [--rounds 2] [--address HOST:PORT]

Each round runs in a fresh process (Ray starts once per process) and prints: ``import ray``;
``ray.init`` for a new local Ray (2 CPUs, no dashboard, token authentication on as
``init_ray`` starts it) split by Ray's own start-up steps, read from a cProfile of the call
(cumulative seconds of the GCS server start, the dashboard API server that Ray starts and
waits for even without a dashboard, the raylet and its agents until the node registers, the
driver's connection); the first two tasks (two worker processes start); the workers' imports
of what a compare cell needs. With ``--address`` it also times ``init_ray(address)`` (the
probe and the connection) to a head that is already up. The 1-minute load average is printed:
on a shared machine every figure grows with it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

# Ray's start-up steps inside ray.init: (label, "file.py:function" as cProfile names it)
STEPS = (("GCS server", "node.py:start_gcs_server"),
         ("dashboard API server, waited for", "node.py:start_api_server"),
         ("raylet and agents until the node registers", "services.py:get_node"),
         ("driver connection", "worker.py:connect"))


def one_round(address: str | None) -> None:
    import cProfile
    import os
    import pstats
    import time

    start = time.perf_counter()
    from routing_gym.ray_cluster import _set_ray_auth_mode, init_ray, ray_module

    ray = ray_module()
    imported = time.perf_counter()
    if address:
        init_ray(address)
        connected = time.perf_counter()
        ray.shutdown()
        print(f"load {os.getloadavg()[0]:.1f} | import ray {imported - start:.1f} s | "
              f"init_ray({address}) with its probe {connected - imported:.1f} s")
        return
    _set_ray_auth_mode("token")  # as init_ray starts a local Ray
    profile = cProfile.Profile()
    profile.enable()
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    profile.disable()
    started = time.perf_counter()
    stats = pstats.Stats(profile).stats  # {(file, line, function): (calls, ..., tottime, cumtime, callers)}
    steps = {label: sum(v[3] for k, v in stats.items() if f"{k[0]}:{k[2]}".endswith(name)) for label, name in STEPS}

    @ray.remote
    def worker_pid() -> int:
        return os.getpid()

    @ray.remote
    def import_cell_modules() -> float:
        began = time.perf_counter()
        import routing_gym.eval.compare.cells  # noqa: F401  (what run_cell needs)
        import routing_gym_agents  # noqa: F401

        return time.perf_counter() - began

    ray.get([worker_pid.remote() for _ in range(2)])
    first_tasks = time.perf_counter()
    worker_imports = max(ray.get([import_cell_modules.remote() for _ in range(2)]))
    ray.shutdown()
    print(f"load {os.getloadavg()[0]:.1f} | import ray {imported - start:.1f} s | ray.init {started - imported:.1f} s ("
          + ", ".join(f"{label} {seconds:.1f}" for label, seconds in steps.items())
          + f") | first 2 tasks {first_tasks - started:.1f} s | worker imports {worker_imports:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--address", default=None, help="also time connecting to this running head")
    parser.add_argument("--one-round", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_round:
        one_round(args.address)
        return
    for _ in range(args.rounds):
        subprocess.run([sys.executable, __file__, "--one-round"], check=True)
        if args.address:
            subprocess.run([sys.executable, __file__, "--one-round", "--address", args.address], check=True)


if __name__ == "__main__":
    main()
