"""An embedding service over Sluice RPC: a server process serves "embed"
(token ids in, one vector per token out); a client process calls it with
batches and checks the answers. Arguments and results are tensors on the
zero-copy path: a large batch is written once into the owner's pool and
read in place by the other side.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/embedding_service.py

runs a cluster in this process, then the server and the client as two
processes against it. Each role also runs alone against any owner:

    ... embedding_service.py serve --address 127.0.0.1:7070
    ... embedding_service.py call  --address 127.0.0.1:7070 --batches 20
"""

import argparse
import signal
import subprocess
import sys
import threading
import time

import numpy as np

import sluice

DIM = 256
VOCAB = 32000


def table():
    # The "model": a fixed embedding table.
    return np.random.default_rng(7).standard_normal((VOCAB, DIM), dtype=np.float32)


def serve(address):
    weights = table()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def embed(args, request):
        ids = np.from_dlpack(args["ids"])  # the caller's bytes, in the pool
        if ids.dtype != np.int64 or ids.ndim != 1:
            raise sluice.InvalidArgument("ids is a 1-d int64 tensor")
        if ids.size and (ids.min() < 0 or ids.max() >= VOCAB):
            raise sluice.InvalidArgument(f"token ids are 0 to {VOCAB - 1}")
        return {"vectors": weights[ids], "in_pool": request.args_in_pool}

    with sluice.connect(address, name="embedder") as c:
        c.serve("embed", embed, max_concurrent=32, workers=4)
        print("serve: embed is served", flush=True)
        stop.wait()


def call(address, batches):
    weights = table()
    rng = np.random.default_rng(1)
    with sluice.connect(address, name="embed-client") as c:
        deadline = time.monotonic() + 30
        while True:  # until the server has registered the name
            try:
                c.call(None, "embed", {"ids": np.zeros(1, dtype=np.int64)})
                break
            except sluice.NotFound:
                if time.monotonic() > deadline:
                    raise SystemExit("call: nobody serves embed")
                time.sleep(0.05)
        start = time.perf_counter()
        in_pool = 0
        for _ in range(batches):
            ids = rng.integers(0, VOCAB, 8192, dtype=np.int64)  # 64 KiB: written into the pool
            out = c.call(None, "embed", {"ids": ids}, timeout=10)
            vectors = np.from_dlpack(out["vectors"])
            if not np.array_equal(vectors, weights[ids]):
                raise SystemExit("call: wrong vectors")
            in_pool += out["in_pool"]
        took = time.perf_counter() - start
        try:
            c.call(None, "embed", {"ids": np.array([VOCAB], dtype=np.int64)})
            raise SystemExit("call: an id out of range was accepted")
        except sluice.InvalidArgument as e:
            print(f"call: a bad id is refused: {e}")
        print(f"call: {batches} batches of 8192 tokens ({8192 * DIM * 4 >> 20} MiB of vectors each) "
              f"in {took * 1000:.0f} ms, all correct; arguments read in the pool: {in_pool}/{batches}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("role", nargs="?", choices=["serve", "call"])
    parser.add_argument("--address", default=None)
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()
    if args.role == "serve":
        return serve(args.address)
    if args.role == "call":
        return call(args.address, args.batches)
    with sluice.LocalCluster() as cluster:
        me = [sys.executable, __file__]
        server = subprocess.Popen(me + ["serve", "--address", cluster.address])
        try:
            subprocess.run(me + ["call", "--address", cluster.address, "--batches", str(args.batches)], check=True)
        finally:
            server.terminate()
            server.wait(30)


if __name__ == "__main__":
    main()
