"""A prefill process hands KV-cache blocks (torch tensors) to a decode
process through Sluice, with no copy on the way out of the pool.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/kv_cache_handoff.py

runs a cluster in this process (sluice.LocalCluster), then a prefill
process and a decode process against it. Either role also runs on its own
against any owner:

    ... kv_cache_handoff.py prefill --address 127.0.0.1:7070 --request 7
    ... kv_cache_handoff.py decode  --address 127.0.0.1:7070 --request 7

Prefill writes each layer's K and V straight into the pool (a reservation
viewed as a torch tensor: the tensor *is* the value, so commit copies
nothing) and a small dict describing the request. Decode reads the dict,
then each layer as a tensor aliasing the pool (torch.from_dlpack on the
View), and checks every element.
"""

import argparse
import subprocess
import sys
import time

import torch

import sluice

LAYERS = 8
HEADS = 8
TOKENS = 512
HEAD_DIM = 128
DTYPE = torch.bfloat16


def block_key(request, layer):
    return f"kv/{request}/layer/{layer}"


def expected_block(request, layer):
    # What prefill computes for (request, layer): K then V, deterministic so
    # decode can check every element.
    g = torch.Generator().manual_seed(request * 1000 + layer)
    return torch.randn(2, HEADS, TOKENS, HEAD_DIM, generator=g).to(DTYPE)


def prefill(address, request):
    with sluice.connect(address) as c:
        start = time.perf_counter()
        for layer in range(LAYERS):
            r = c.reserve(block_key(request, layer), ((2, HEADS, TOKENS, HEAD_DIM), DTYPE))
            torch.from_dlpack(r).copy_(expected_block(request, layer))  # written in the pool itself
            r.commit()
        c.put(f"kv/{request}/meta", {"layers": LAYERS, "tokens": TOKENS, "dtype": str(DTYPE), "request": request})
        took = time.perf_counter() - start
        mib = LAYERS * 2 * HEADS * TOKENS * HEAD_DIM * 2 / (1 << 20)
        print(f"prefill: request {request}: {LAYERS} layers, {mib:.0f} MiB of KV cache in {took * 1000:.1f} ms")


def decode(address, request):
    with sluice.connect(address) as c:
        deadline = time.monotonic() + 30
        meta = c.get(f"kv/{request}/meta")
        while meta is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"decode: request {request} never arrived")
            time.sleep(0.01)
            meta = c.get(f"kv/{request}/meta")
        for layer in range(meta["layers"]):
            view = c.get(block_key(request, layer))
            kv = torch.from_dlpack(view)  # aliases the pool: no copy
            assert kv.data_ptr() == view.data_ptr
            if not torch.equal(kv, expected_block(request, layer)):
                raise SystemExit(f"decode: layer {layer} of request {request} differs")
        print(f"decode: request {request}: {meta['layers']} layers of {meta['tokens']} tokens read in place, all equal")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("role", nargs="?", choices=["prefill", "decode"], help="run one role against --address")
    parser.add_argument("--address", default=None, help="the owner (default: SLUICE_ADDRESS, else 127.0.0.1:7070)")
    parser.add_argument("--request", type=int, default=1)
    args = parser.parse_args()
    if args.role == "prefill":
        return prefill(args.address, args.request)
    if args.role == "decode":
        return decode(args.address, args.request)
    with sluice.LocalCluster() as cluster:
        me = [sys.executable, __file__]
        common = ["--address", cluster.address, "--request", str(args.request)]
        decoder = subprocess.Popen(me + ["decode"] + common)
        subprocess.run(me + ["prefill"] + common, check=True)
        if decoder.wait(60) != 0:
            raise SystemExit("the decode process failed")


if __name__ == "__main__":
    main()
