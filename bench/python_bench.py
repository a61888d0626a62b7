"""bench/run python: the Python module against numpy's own copy and
against redis-py with Redis, in one run, with the same CPU placement
(bench/run pins this process to the client CPU and the servers to the
server CPU).

Every measurement runs for --seconds, --rounds times; each figure is the
median of the rounds, printed as `figure NAME VALUE UNIT`, with
`spread NAME MIN MAX UNIT` beside it. Every byte a get returns is checked
(outside the timed part of each operation).

    PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py --sluice HOST:PORT --redis HOST:PORT
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import sluice

SMALL = 4096
LARGE = 64 << 20


def timed_ops(seconds, op, check=None):
    """Runs op() for `seconds`: (per-operation latencies in s, ops per s).
    check(result) runs after each timed op, outside the timing."""
    latencies = []
    clock = time.perf_counter
    end = clock() + seconds
    started = clock()
    checking = 0.0
    while True:
        t0 = clock()
        if t0 >= end:
            break
        out = op()
        t1 = clock()
        latencies.append(t1 - t0)
        if check is not None:
            check(out)
            checking += clock() - t1
    took = clock() - started - checking
    return latencies, len(latencies) / took


def timed_batches(seconds, op, check, batch):
    """Like timed_ops, for results too large to check one by one between
    operations without cooling every cache the next one uses: `batch`
    operations back to back, timed each, then each result checked."""
    latencies = []
    clock = time.perf_counter
    end = clock() + seconds
    while clock() < end:
        results = []
        for _ in range(batch):
            t0 = clock()
            results.append(op())
            latencies.append(clock() - t0)
        for out in results:
            check(out)
        del results
    return latencies


def expect(ok, what):
    if not ok:
        raise SystemExit("bench: wrong bytes: " + what)


def p50_us(latencies):
    return statistics.median(latencies) * 1e6


class Figures:
    def __init__(self):
        self.rounds = {}
        self.units = {}

    def add(self, name, value, unit):
        self.rounds.setdefault(name, []).append(value)
        self.units[name] = unit

    def print(self):
        for name, values in self.rounds.items():
            unit = self.units[name]
            print(f"figure {name} {statistics.median(values):.4g} {unit}")
            print(f"spread {name} {min(values):.4g} {max(values):.4g} {unit}")


def echo_server(address):
    """A process serving py.echo: its argument back, as the result."""
    code = f"""
import signal, threading, sluice
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
with sluice.connect({address!r}, name="py-echo", timeout=30) as c:
    c.serve("py.echo", lambda args: {{"t": args["t"]}}, workers=1)
    print("ready", flush=True)
    stop.wait()
"""
    cmd = [sys.executable, "-c", code]
    cpu = os.environ.get("SERVER_CPU")
    if cpu:
        cmd = ["taskset", "-c", cpu] + cmd
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit("bench: the echo server did not start")
    return proc


def one_round(c, r, seconds, figures):
    rng = np.random.default_rng(len(figures.rounds.get("py_get_view_4k_us", [])) + 1)
    small = rng.integers(0, 255, SMALL, dtype=np.uint8)
    large = rng.integers(0, 255, LARGE, dtype=np.uint8)
    small_bytes = small.tobytes()

    # numpy's own copy of 64 MiB: the floor a put into the pool is held to.
    dst = np.empty_like(large)
    lat, _ = timed_ops(seconds, lambda: np.copyto(dst, large))
    memcpy_gbps = LARGE / statistics.median(lat) / 1e9
    figures.add("py_memcpy_64m_gbps", memcpy_gbps, "GB/s")

    # --- 4 KiB ---
    c.put("bench/py/4k", small)

    def check_small_view(v):
        expect(np.array_equal(np.from_dlpack(v), small), "a 4 KiB view")

    lat, _ = timed_ops(seconds, lambda: c.put("bench/py/4k-put", small))
    figures.add("py_put_4k_us", p50_us(lat), "us")
    expect(np.array_equal(np.from_dlpack(c.get("bench/py/4k-put")), small), "4 KiB put")
    lat, _ = timed_ops(seconds, lambda: c.put("bench/py/4k-put-bytes", small_bytes))
    figures.add("py_put_4k_bytes_us", p50_us(lat), "us")
    expect(bytes(c.get("bench/py/4k-put-bytes")) == small_bytes, "4 KiB put as bytes")

    lat, sluice_get_ops = timed_ops(seconds, lambda: c.get("bench/py/4k"), check_small_view)
    figures.add("py_get_view_4k_us", p50_us(lat), "us")
    figures.add("py_get_4k_ops", sluice_get_ops, "ops/s")
    lat, _ = timed_ops(seconds, lambda: np.from_dlpack(c.get("bench/py/4k")),
                       lambda a: expect(np.array_equal(a, small), "4 KiB through DLPack"))
    figures.add("py_get_dlpack_4k_us", p50_us(lat), "us")
    c.put("bench/py/4k-b", small_bytes)
    lat, _ = timed_ops(seconds, lambda: bytes(c.get("bench/py/4k-b")),
                       lambda b: expect(b == small_bytes, "4 KiB as bytes"))
    figures.add("py_get_bytes_4k_us", p50_us(lat), "us")

    r.set("bench/py/4k", small_bytes)
    lat, _ = timed_ops(seconds, lambda: r.set("bench/py/4k-put", small_bytes))
    figures.add("redis_py_put_4k_us", p50_us(lat), "us")
    lat, redis_get_ops = timed_ops(seconds, lambda: r.get("bench/py/4k"),
                                   lambda b: expect(b == small_bytes, "4 KiB from redis"))
    figures.add("redis_py_get_4k_us", p50_us(lat), "us")
    figures.add("redis_py_get_4k_ops", redis_get_ops, "ops/s")
    figures.add("py_get_4k_vs_redis_py", sluice_get_ops / redis_get_ops, "x")
    figures.add("py_put_4k_vs_redis_py",
                figures.rounds["redis_py_put_4k_us"][-1] / figures.rounds["py_put_4k_us"][-1], "x")

    # --- 64 MiB ---
    lat, _ = timed_ops(seconds, lambda: c.put("bench/py/64m", large))
    put_gbps = LARGE / statistics.median(lat) / 1e9
    figures.add("py_put_64m_gbps", put_gbps, "GB/s")
    figures.add("py_put_64m_vs_memcpy", put_gbps / memcpy_gbps, "x")

    def check_large_view(v):
        expect(np.array_equal(np.from_dlpack(v), large), "a 64 MiB view")

    lat = timed_batches(seconds, lambda: c.get("bench/py/64m"), check_large_view, 16)
    figures.add("py_get_view_64m_us", p50_us(lat), "us")
    lat, _ = timed_ops(seconds, lambda: bytes(c.get("bench/py/64m")),
                       lambda b: expect(np.array_equal(np.frombuffer(b, np.uint8), large), "64 MiB as bytes"))
    figures.add("py_get_bytes_64m_gbps", LARGE / statistics.median(lat) / 1e9, "GB/s")

    large_bytes = large.tobytes()
    lat, _ = timed_ops(seconds, lambda: r.set("bench/py/64m", large_bytes))
    figures.add("redis_py_put_64m_gbps", LARGE / statistics.median(lat) / 1e9, "GB/s")
    lat, _ = timed_ops(seconds, lambda: r.get("bench/py/64m"),
                       lambda b: expect(b == large_bytes, "64 MiB from redis"))
    figures.add("redis_py_get_64m_gbps", LARGE / statistics.median(lat) / 1e9, "GB/s")
    figures.add("py_put_64m_vs_redis_py",
                put_gbps / figures.rounds["redis_py_put_64m_gbps"][-1], "x")

    # RPC: a 64 MiB tensor to a handler in another process and back.
    def check_echo(out):
        expect(np.array_equal(np.from_dlpack(out["t"]), large), "the 64 MiB echo")

    lat, _ = timed_ops(seconds, lambda: c.call(None, "py.echo", {"t": large}, timeout=30), check_echo)
    echo_gbps = LARGE / statistics.median(lat) / 1e9
    figures.add("py_rpc_echo_64m_us", p50_us(lat), "us")
    figures.add("py_rpc_echo_64m_vs_memcpy", echo_gbps / memcpy_gbps, "x")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sluice", required=True)
    p.add_argument("--redis", required=True)
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    import redis

    host, port = a.redis.rsplit(":", 1)
    r = redis.Redis(host=host, port=int(port))
    figures = Figures()
    server = echo_server(a.sluice)
    try:
        with sluice.connect(a.sluice, timeout=30) as c:
            deadline = time.monotonic() + 10
            while True:
                try:
                    c.call(None, "py.echo", {"t": np.zeros(1)})
                    break
                except sluice.NotFound:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            # The pool's pages get memory on first touch: one pass of 64 MiB
            # puts over the whole pool first, as the C++ large_bench does.
            warm = np.zeros(LARGE, dtype=np.uint8)
            for i in range(24):
                c.put(f"bench/py/warm/{i % 12}", warm)
            for i in range(12):
                c.remove(f"bench/py/warm/{i}")
            for i in range(a.rounds):
                print(f"bench: python round {i + 1} of {a.rounds}", flush=True)
                one_round(c, r, a.seconds, figures)
    finally:
        server.terminate()
        server.wait(30)
    figures.print()


if __name__ == "__main__":
    main()
