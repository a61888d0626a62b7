"""Ctrl-C interrupts a long blocking wait with KeyboardInterrupt."""

import os
import signal
import subprocess
import sys
import time

CHILD = r"""
import os, sys, time
import sluice

server = sluice.connect(name="sleeper")
server.serve("py.sleep", lambda args: time.sleep(args.get("s", 0)) or {}, workers=1)
server.serve_stream("py.slow-stream", lambda args: (time.sleep(30) or {} for _ in range(1)), workers=1)
caller = sluice.connect(name="impatient")
deadline = time.monotonic() + 10
while True:
    try:
        caller.call(None, "py.sleep", {"s": 0})
        break
    except sluice.NotFound:
        assert time.monotonic() < deadline
        time.sleep(0.02)
what = sys.argv[1]
print("waiting", flush=True)
start = time.monotonic()
try:
    if what == "call":
        caller.call(None, "py.sleep", {"s": 30}, timeout=60)
    else:
        next(iter(caller.call_stream(None, "py.slow-stream", {}, timeout=60)))
    print("returned", flush=True)
except KeyboardInterrupt:
    print(f"interrupted {time.monotonic() - start:.2f}", flush=True)
os._exit(0)  # the handler's thread still sleeps
"""


def interrupted_after(owner, what):
    env = dict(os.environ, SLUICE_ADDRESS=owner.address)
    child = subprocess.Popen([sys.executable, "-c", CHILD, what], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "waiting"
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        line = child.stdout.readline().split()
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert line and line[0] == "interrupted", line
    return float(line[1])


def test_ctrl_c_interrupts_a_long_rpc_call(owner):
    # The handler would sleep 30 s; the call waits in slices and stops at once.
    assert interrupted_after(owner, "call") < 3.0


def test_ctrl_c_interrupts_a_stream_waiting_for_its_next_item(owner):
    assert interrupted_after(owner, "stream") < 3.0
