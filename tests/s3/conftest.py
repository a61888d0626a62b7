"""Fixtures for the S3 gateway tests: a real `sluice s3` process on a free
port over temporary directories, and boto3 clients of it.

Run through ctest (one ctest per test function), or directly:
    SLUICE_BINARY=build/api/sluice /usr/bin/python3 -m pytest tests/s3
"""

import os
import re
import subprocess

import pytest

# Without boto3 every test is collected and skipped (so ctest, which names
# each test, sees a skip and not "no such test").
try:
    import boto3
    from botocore.exceptions import ClientError

    HAVE_BOTO3 = True
except ImportError:
    boto3 = None
    HAVE_BOTO3 = False

    class ClientError(Exception):
        pass

requires_boto3 = pytest.mark.skipif(not HAVE_BOTO3,
                                    reason="python3-boto3 is not installed (scripts/bootstrap.sh installs it)")

SLUICE_BINARY = os.environ.get("SLUICE_BINARY", "build/api/sluice")


def end_process(proc, wait=10):
    """SIGTERM, and SIGKILL when `proc` has not exited within `wait` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Gateway:
    """A `sluice s3` process exporting `data_dir` as bucket `data`, with
    `root_dir` for buckets made through the API: anonymous, or checking
    SigV4 signatures when given `access` = (key, secret), or the users of
    the file `users`."""

    def __init__(self, tmp_path, extra_args=(), access=None, users=None):
        self.data_dir = os.path.join(tmp_path, "data")
        self.root_dir = os.path.join(tmp_path, "root")
        os.makedirs(self.data_dir, exist_ok=True)
        os.makedirs(self.root_dir, exist_ok=True)
        who = ["--access-key", access[0], "--secret-key", access[1]] if access else ["--anonymous"]
        if users:
            who = ["--users", users]
        args = [SLUICE_BINARY, "s3", "--listen", "127.0.0.1:0", "--bucket", "data=" + self.data_dir,
                "--root", self.root_dir, *who, *extra_args]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        found = re.search(r"listening on (\S+)", line)
        if not found:
            self.proc.kill()
            raise RuntimeError("sluice s3 did not start: " + line + self.proc.stderr.read())
        self.address = found.group(1)
        self.endpoint = "http://" + self.address
        self.host, self.port = self.address.rsplit(":", 1)

    def client(self, key="anonymous", secret="anonymous", **config):
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1",
            aws_access_key_id=key, aws_secret_access_key=secret,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, **config))

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        end_process(self.proc)
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def gateway(tmp_path):
    g = Gateway(str(tmp_path))
    yield g
    assert g.alive(), "the gateway exited during the test"
    g.stop()


@pytest.fixture
def s3(gateway):
    return gateway.client()


def pytest_sessionfinish(session, exitstatus):
    # A run where everything was skipped (no boto3) tells ctest so
    # (SKIP_RETURN_CODE 77), rather than passing.
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or exitstatus != 0:
        return
    if reporter.stats.get("skipped") and not reporter.stats.get("passed"):
        session.exitstatus = 77
