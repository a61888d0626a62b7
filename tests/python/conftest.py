"""Fixtures for the Python tests: a real `sluice up` owner in a process of
its own (the way a user runs one), and clients of it.

Run through ctest (one ctest per test function), or directly:
    PYTHONPATH=build/python SLUICE_BINARY=build/api/sluice /usr/bin/python3 -m pytest tests/python
"""

import os
import re
import signal
import subprocess
import time

import pytest

import sluice

SLUICE_BINARY = os.environ.get("SLUICE_BINARY", "build/api/sluice")


class Owner:
    """A `sluice up` process: a master and an owner, listening on free ports."""

    def __init__(self, config_text=None, tmp_path=None):
        args = [SLUICE_BINARY, "up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0"]
        if config_text is not None:
            path = os.path.join(tmp_path, "node.toml")
            with open(path, "w") as f:
                f.write(config_text)
            args += ["--config", path]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        found = re.search(r"listening on (\S+)", line)
        if not found:
            self.proc.kill()
            raise RuntimeError("sluice up did not start: " + line + self.proc.stderr.read())
        self.address = found.group(1)

    def pause(self):
        """Stops the process, and returns once every thread of it is stopped."""
        self.proc.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while not self._all_stopped():
            if time.monotonic() > deadline:
                raise RuntimeError("sluice up did not stop")
            time.sleep(0.001)

    def _all_stopped(self):
        task_dir = f"/proc/{self.proc.pid}/task"
        for tid in os.listdir(task_dir):
            try:
                with open(f"{task_dir}/{tid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:
                continue  # the thread ended
            if state not in ("T", "t"):
                return False
        return True

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def stop(self):
        if self.proc.poll() is None:
            self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture(scope="session")
def owner():
    o = Owner()
    yield o
    o.stop()


@pytest.fixture
def make_owner(tmp_path):
    """Starts owners of their own, with a configuration, stopped at the end."""
    started = []

    def make(config_text=None):
        o = Owner(config_text, str(tmp_path))
        started.append(o)
        return o

    yield make
    for o in started:
        o.stop()


@pytest.fixture
def client(owner):
    with sluice.connect(owner.address) as c:
        yield c


def memfd_mappings():
    """(start, end) of every shared-memory segment mapped in this process
    (the owner's pool segments are memfds)."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and fields[5].startswith("/memfd:sluice-pool"):
                start, end = (int(x, 16) for x in fields[0].split("-"))
                out.append((start, end))
    return out


def in_pool(address, nbytes):
    return any(start <= address and address + nbytes <= end for start, end in memfd_mappings())


def pytest_sessionfinish(session, exitstatus):
    # A run where everything was skipped tells ctest so (SKIP_RETURN_CODE),
    # rather than passing.
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or exitstatus != 0:
        return
    if reporter.stats.get("skipped") and not reporter.stats.get("passed"):
        session.exitstatus = 77
