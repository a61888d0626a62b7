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
    elif what == "short-call":
        # A deadline of 1 s or less: on the thread's own shm channel.
        caller.call(None, "py.sleep", {"s": 30}, timeout=1.0)
    else:
        next(iter(caller.call_stream(None, "py.slow-stream", {}, timeout=60)))
    print("returned", flush=True)
except KeyboardInterrupt:
    print(f"interrupted {time.monotonic() - start:.2f}", flush=True)
os._exit(0)  # the handler's thread still sleeps
"""


KV_CHILD = r"""
import os, sys, time
import sluice

c = sluice.connect()
c.put("signals/key", b"x" * 4096)
c.put("signals/other", b"y" * 4096)
assert c.get("signals/key") is not None
print("ready", flush=True)
sys.stdin.readline()  # the owner is stopped now: no call is answered
what = sys.argv[1]
print("waiting", flush=True)
start = time.monotonic()
try:
    if what == "get":
        c.get("signals/key", timeout=60)
    elif what == "get_many":
        c.get_many(["signals/key", "signals/other"], timeout=60)
    else:
        c.put("signals/key", b"z" * 4096, timeout=60)
    print("returned", flush=True)
except KeyboardInterrupt:
    print(f"interrupted {time.monotonic() - start:.2f}", flush=True)
except sluice.Error as e:
    print(f"failed {e!r}", flush=True)
os._exit(0)
"""


def run_and_interrupt(owner, script, what, delay, paused=False):
    """Runs `script` in a child connected to `owner` and sends it SIGINT
    `delay` s after it says "waiting"; returns how long its call lasted.
    With `paused`, the child first says "ready", and the owner is stopped
    before the child is let go, so no call of it is answered."""
    env = dict(os.environ, SLUICE_ADDRESS=owner.address)
    child = subprocess.Popen([sys.executable, "-c", script, what], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        if paused:
            assert child.stdout.readline().strip() == "ready"
            owner.pause()
            child.stdin.write("go\n")
            child.stdin.flush()
        assert child.stdout.readline().strip() == "waiting"
        time.sleep(delay)
        child.send_signal(signal.SIGINT)
        line = child.stdout.readline().split()
        child.wait(30)
    finally:
        if paused:
            owner.resume()
        if child.poll() is None:
            child.kill()
            child.wait()
    assert line and line[0] == "interrupted", line
    return float(line[1])


def interrupted_kv_call(owner, what, delay=0.5):
    return run_and_interrupt(owner, KV_CHILD, what, delay, paused=True)


def interrupted_after(owner, what, delay=0.5):
    return run_and_interrupt(owner, CHILD, what, delay)


def test_ctrl_c_interrupts_a_long_rpc_call(owner):
    # The handler would sleep 30 s; the call waits in slices and stops at once.
    assert interrupted_after(owner, "call") < 3.0


def test_ctrl_c_interrupts_a_stream_waiting_for_its_next_item(owner):
    assert interrupted_after(owner, "stream") < 3.0


def test_ctrl_c_interrupts_a_short_rpc_call(owner):
    # Its deadline (1 s) is short enough for the thread's own channel; the
    # interrupt comes before the deadline, and the child says which ended it.
    interrupted_after(owner, "short-call", delay=0.3)


def test_ctrl_c_interrupts_a_get_the_owner_does_not_answer(make_owner):
    assert interrupted_kv_call(make_owner(), "get") < 3.0


def test_ctrl_c_interrupts_a_get_many(make_owner):
    assert interrupted_kv_call(make_owner(), "get_many") < 3.0


def test_ctrl_c_interrupts_a_put(make_owner):
    assert interrupted_kv_call(make_owner(), "put") < 3.0
