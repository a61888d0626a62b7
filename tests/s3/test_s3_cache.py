"""The gateway's chunk cache: objects cut into chunks kept in an owner's
pool. A read after the first comes from the pool; a file changed behind
the gateway is read anew; an owner that goes away leaves the files
serving every read."""

import os
import re
import subprocess

from conftest import SLUICE_BINARY, boto3, requires_boto3

pytestmark = requires_boto3

MIB = 1 << 20


class Up:
    """`sluice up`, with an anonymous S3 gateway over `data` when `s3`."""

    def __init__(self, tmp_path, s3=True, config=None):
        self.data = tmp_path / "data"
        self.data.mkdir(exist_ok=True)
        args = [SLUICE_BINARY, "up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0", "--data-dir",
                str(tmp_path / "state")]
        if config:
            args += ["--config", str(config)]
        if s3:
            args += ["--s3", "127.0.0.1:0", "--s3-bucket", f"data={self.data}", "--s3-anonymous"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("stop with"):
                break
        text = "".join(self.lines)
        found = re.search(r"sluice up: listening on (\S+)", text)
        if not found:
            self.proc.kill()
            raise RuntimeError("sluice up did not start: " + text + self.proc.stderr.read())
        self.owner = found.group(1)
        found = re.search(r"S3 gateway listening on (\S+)", text)
        self.address = found.group(1) if found else None

    def kv(self, *args):
        done = subprocess.run([SLUICE_BINARY, "kv", *args[:1], "--connect", self.owner, *args[1:]],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def chunks(self):
        return int(self.kv("count", "~s3/data/"))

    def stop(self):
        alive = self.proc.poll() is None
        if alive:
            self.proc.terminate()
            self.proc.wait(30)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return alive


def s3_client(address):
    from botocore.config import Config

    return boto3.client("s3", endpoint_url="http://" + address, region_name="us-east-1",
                        aws_access_key_id="anonymous", aws_secret_access_key="anonymous",
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                                      read_timeout=30))


def pattern(size, salt):
    block = bytes((i * 131 + salt) & 0xFF for i in range(4093))
    return (block * (size // len(block) + 1))[:size]


def test_reads_after_the_first_come_from_the_pool(tmp_path):
    up = Up(tmp_path)
    try:
        assert "chunks of 4 MiB cached in the pool of the owner at " + up.owner in "".join(up.lines)
        s3 = s3_client(up.address)
        body = pattern(9 * MIB + 17, 1)  # two whole chunks and a short one
        s3.put_object(Bucket="data", Key="big", Body=body)
        assert up.chunks() == 0  # a put writes the file; reads fill the cache
        assert s3.get_object(Bucket="data", Key="big")["Body"].read() == body
        assert up.chunks() == 3
        assert s3.get_object(Bucket="data", Key="big")["Body"].read() == body
        got = s3.get_object(Bucket="data", Key="big", Range=f"bytes={4 * MIB - 5}-{8 * MIB + 4}")["Body"].read()
        assert got == body[4 * MIB - 5:8 * MIB + 5]
        assert up.chunks() == 3

        # Rewrite the file in place keeping its size, inode and mtime: the
        # cache cannot see that change (docs/s3.md says so), and serves the
        # bytes it holds. So those bytes come from the pool, not the file.
        path = up.data / "big"
        st = os.stat(path)
        with open(path, "r+b") as f:
            f.write(b"X" * 10)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert s3.get_object(Bucket="data", Key="big")["Body"].read() == body

        # A change the cache can see: new bytes at once.
        changed = pattern(5 * MIB, 2)
        path.write_bytes(changed)
        assert s3.get_object(Bucket="data", Key="big")["Body"].read() == changed
        assert up.chunks() == 5  # the old chunks stay until the pool evicts them
    finally:
        assert up.stop(), "sluice up exited during the test"


def test_the_cache_can_be_turned_off(tmp_path):
    config = tmp_path / "sluice.toml"
    config.write_text("[s3]\ncache = false\n")
    up = Up(tmp_path, config=config)
    try:
        assert "no chunk cache: every read reads the file (cache = false)" in "".join(up.lines)
        s3 = s3_client(up.address)
        s3.put_object(Bucket="data", Key="k", Body=b"v" * 100000)
        assert s3.get_object(Bucket="data", Key="k")["Body"].read() == b"v" * 100000
        assert int(up.kv("count", "~s3/")) == 0
    finally:
        assert up.stop()


def test_a_gateway_whose_owner_goes_away_reads_the_files(tmp_path):
    owner = Up(tmp_path, s3=False)
    data = tmp_path / "data"
    args = [SLUICE_BINARY, "s3", "--listen", "127.0.0.1:0", "--bucket", f"data={data}", "--anonymous", "--owner",
            owner.owner, "--chunk-size", "1MiB"]
    gateway = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = gateway.stdout.readline()
        address = re.search(r"listening on (\S+)", first).group(1)
        assert "chunks of 1 MiB cached in the pool of the owner at " + owner.owner in gateway.stdout.readline()
        s3 = s3_client(address)
        body = pattern(3 * MIB + 1, 3)
        s3.put_object(Bucket="data", Key="obj", Body=body)
        assert s3.get_object(Bucket="data", Key="obj")["Body"].read() == body
        assert owner.chunks() == 4
        assert owner.stop()
        for _ in range(3):
            assert s3.get_object(Bucket="data", Key="obj")["Body"].read() == body
        assert gateway.poll() is None
    finally:
        owner.stop()
        gateway.terminate()
        gateway.wait(30)
        gateway.stdout.close()
        gateway.stderr.close()


def test_sluice_s3_refuses_an_owner_it_cannot_reach_and_a_bad_chunk_size(tmp_path):
    def s3(*extra):
        return subprocess.run([SLUICE_BINARY, "s3", "--listen", "127.0.0.1:0", "--bucket", f"data={tmp_path}",
                               "--anonymous", *extra], capture_output=True, text=True, timeout=60)

    done = s3("--chunk-size", "1KiB")
    assert done.returncode == 2 and "64 KiB to 64 MiB" in done.stderr, done.stderr
    done = s3("--owner", "127.0.0.1:1")
    assert done.returncode == 1 and "cannot reach the owner at 127.0.0.1:1" in done.stderr, done.stderr
