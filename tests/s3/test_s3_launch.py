"""Starting the gateway from the launcher: `sluice s3 --config FILE` with
its [s3] section (flags given win), and `sluice up --s3 HOST:PORT`, which
serves S3 beside the owner in the same process."""

import os
import re
import subprocess

import pytest

from conftest import SLUICE_BINARY, ClientError, boto3, requires_boto3

pytestmark = requires_boto3

KEY, SECRET = "AKIDLAUNCH", "launch-secret"


class Started:
    """A launcher process, read until the line naming the S3 address."""

    def __init__(self, args, marker):
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.address = None
        for line in self.proc.stdout:
            self.lines.append(line)
            found = re.search(marker + r" listening on (\S+)", line)
            if found:
                self.address = found.group(1)
                break
        if self.address is None:
            self.proc.kill()
            raise RuntimeError("no S3 address in " + "".join(self.lines) + self.proc.stderr.read())

    def client(self, key=KEY, secret=SECRET):
        from botocore.config import Config

        return boto3.client("s3", endpoint_url="http://" + self.address, region_name="us-east-1",
                            aws_access_key_id=key, aws_secret_access_key=secret,
                            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))

    def stop(self):
        alive = self.proc.poll() is None
        if alive:
            self.proc.terminate()
            self.proc.wait(20)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return alive


def write_config(tmp_path, text):
    path = os.path.join(tmp_path, "sluice.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def test_sluice_s3_reads_its_settings_from_the_s3_section(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    config = write_config(tmp_path, f'[s3]\nlisten = "127.0.0.1:0"\nbuckets = ["data={data}"]\nroot = "{root}"\n'
                                    f'access_key = "{KEY}"\nsecret_key = "{SECRET}"\n')
    g = Started([SLUICE_BINARY, "s3", "--config", config], "sluice s3:")
    try:
        assert f"access key {KEY}" in g.lines[-1]
        s3 = g.client()
        s3.put_object(Bucket="data", Key="from-config", Body=b"configured")
        assert (data / "from-config").read_bytes() == b"configured"
        s3.create_bucket(Bucket="made")
        assert (root / "made").is_dir()
        with pytest.raises(ClientError) as e:
            g.client(secret="wrong").get_object(Bucket="data", Key="from-config")
        assert e.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    finally:
        assert g.stop(), "the gateway exited during the test"


def test_flags_given_win_over_the_s3_section(tmp_path):
    in_file = tmp_path / "in-file"
    in_file.mkdir()
    on_line = tmp_path / "on-line"
    on_line.mkdir()
    config = write_config(tmp_path, f'[s3]\nlisten = "127.0.0.1:1"\nbuckets = ["data={in_file}"]\n'
                                    f'access_key = "{KEY}"\nsecret_key = "{SECRET}"\n')
    g = Started([SLUICE_BINARY, "s3", "--config", config, "--listen", "127.0.0.1:0", "--bucket", f"data={on_line}",
                 "--access-key", "OTHERKEY"], "sluice s3:")
    try:
        g.client(key="OTHERKEY").put_object(Bucket="data", Key="k", Body=b"v")  # the file's secret, the flag's key
        assert (on_line / "k").read_bytes() == b"v"
        assert not (in_file / "k").exists()
    finally:
        assert g.stop()


def test_a_bad_s3_section_is_refused_with_what_to_fix(tmp_path):
    def start(text, *extra):
        config = write_config(tmp_path, text)
        return subprocess.run([SLUICE_BINARY, "s3", "--config", config, *extra], capture_output=True, text=True,
                              timeout=30)

    done = start('[s3]\nlisten = "127.0.0.1:0"\nbucket = ["data=/tmp"]\n')
    assert done.returncode == 2 and "did you mean 's3.buckets'" in done.stderr
    done = start(f'[s3]\nlisten = "127.0.0.1:0"\nbuckets = ["data={tmp_path}"]\n')
    assert done.returncode == 2 and "anonymous = true" in done.stderr and "--anonymous" in done.stderr
    done = start(f'[s3]\nlisten = "127.0.0.1:0"\nbuckets = ["data={tmp_path}"]\nanonymous = true\n'
                 f'access_key = "k"\nsecret_key = "s"\n')
    assert done.returncode == 2 and "exclude each other" in done.stderr
    done = start('[s3]\nlisten = "127.0.0.1:0"\nanonymous = true\n')
    assert done.returncode == 2 and "nothing to serve" in done.stderr


def test_sluice_up_serves_s3_beside_its_owner(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    up = Started([SLUICE_BINARY, "up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0",
                  "--s3", "127.0.0.1:0", "--s3-bucket", f"data={data}", "--s3-access-key", KEY,
                  "--s3-secret-key", SECRET], "S3 gateway")
    try:
        owner = re.search(r"sluice up: listening on (\S+)", "".join(up.lines)).group(1)
        s3 = up.client()
        s3.put_object(Bucket="data", Key="beside/owner", Body=b"one process")
        assert (data / "beside" / "owner").read_bytes() == b"one process"
        assert s3.get_object(Bucket="data", Key="beside/owner")["Body"].read() == b"one process"
        # The owner serves its clients as ever.
        put = subprocess.run([SLUICE_BINARY, "kv", "put", "--connect", owner, "greeting", "-"], input=b"hello",
                             capture_output=True, timeout=30)
        assert put.returncode == 0, put.stderr
        got = subprocess.run([SLUICE_BINARY, "kv", "get", "--connect", owner, "greeting"], capture_output=True,
                             timeout=30)
        assert got.stdout.rstrip(b"\n") == b"hello"
    finally:
        assert up.stop(), "sluice up exited during the test"


def test_sluice_up_takes_the_gateway_from_its_config_file(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    config = write_config(tmp_path, f'[s3]\nlisten = "127.0.0.1:0"\nbuckets = ["data={data}"]\nanonymous = true\n')
    up = Started([SLUICE_BINARY, "up", "--config", config, "--listen", "127.0.0.1:0", "--master-listen",
                  "127.0.0.1:0"], "S3 gateway")
    try:
        assert "anonymous" in up.lines[-1]
        up.client().put_object(Bucket="data", Key="k", Body=b"from the file")
        assert (data / "k").read_bytes() == b"from the file"
    finally:
        assert up.stop()


def test_sluice_up_refuses_gateway_settings_that_cannot_work(tmp_path):
    def up(*args):
        return subprocess.run([SLUICE_BINARY, "up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0",
                               *args], capture_output=True, text=True, timeout=30)

    done = up("--s3-bucket", f"data={tmp_path}")
    assert done.returncode == 2 and "--s3 HOST:PORT" in done.stderr
    done = up("--s3", "127.0.0.1:0", "--s3-bucket", f"data={tmp_path}")
    assert done.returncode == 2 and "--s3-anonymous" in done.stderr
    done = up("--s3", "127.0.0.1:0", "--s3-bucket", "Bad_Name=/tmp", "--s3-anonymous")
    assert done.returncode == 2 and "not an S3 bucket name" in done.stderr
