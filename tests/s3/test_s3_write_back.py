"""Write-back buckets: a PUT is answered once its chunks are kept in the
pool and recorded in the journal; the file follows. Read back at once,
in the directory after the flush, and neither lost when the gateway (or,
with 2 copies, the owner with it) is SIGKILLed right after the answer."""

import hashlib
import json
import os
import re
import signal
import subprocess
import time

from conftest import SLUICE_BINARY, boto3, end_process, requires_boto3

pytestmark = requires_boto3

MIB = 1 << 20


def pattern(size, salt):
    block = bytes((i * 131 + salt) & 0xFF for i in range(4093))
    return (block * (size // len(block) + 1))[:size]


def start(args, first_line_pattern):
    """Runs `sluice ARGS`; the first match of the pattern in its output, and the process."""
    proc = subprocess.Popen([SLUICE_BINARY, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        found = re.search(first_line_pattern, line)
        if found:
            return proc, found.group(1), lines
    proc.kill()
    raise RuntimeError(f"sluice {' '.join(args)} did not start: " + "".join(lines) + proc.stderr.read())


def close(proc):
    end_process(proc)
    proc.stdout.close()
    proc.stderr.close()


def kill(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()


def s3_client(address):
    from botocore.config import Config

    return boto3.client("s3", endpoint_url="http://" + address, region_name="us-east-1",
                        aws_access_key_id="anonymous", aws_secret_access_key="anonymous",
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                                      read_timeout=60))


def gateway(data, journal, owner, *extra):
    proc, address, lines = start(["s3", "--listen", "127.0.0.1:0", "--bucket", f"data={data}", "--anonymous",
                                  "--owner", owner, "--write-back", "data", "--journal", str(journal), *extra],
                                 r"listening on (\S+)")
    # The cache line, then the write-back line.
    lines.append(proc.stdout.readline())
    lines.append(proc.stdout.readline())
    return proc, address, "".join(lines)


def status(journal):
    done = subprocess.run([SLUICE_BINARY, "s3", "status", "--journal", str(journal), "--json"], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def wait_for_file(path, body, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size == len(body) and path.read_bytes() == body:
            return True
        time.sleep(0.05)
    return False


def test_a_write_back_put_is_read_back_at_once_and_reaches_its_file(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    owner, owner_address, _ = start(["up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0",
                                     "--data-dir", str(tmp_path / "state")], r"sluice up: listening on (\S+)")
    journal = tmp_path / "journal.db"
    g, address, text = gateway(data, journal, owner_address, "--flush-delay", "2s", "--chunk-size", "1MiB")
    try:
        assert "write-back for buckets data: 1 copy of each chunk, journal " + str(journal) in text, text
        s3 = s3_client(address)
        body = pattern(3 * MIB + 5, 1)
        put = s3.put_object(Bucket="data", Key="dir/obj", Body=body, ContentType="text/x-test",
                            Metadata={"origin": "test"})
        etag = put["ETag"]
        assert etag == '"' + hashlib.md5(body).hexdigest() + '"'
        # Answered before the file is written; read back, listed and shown dirty meanwhile.
        assert not (data / "dir" / "obj").exists()
        got = s3.get_object(Bucket="data", Key="dir/obj")
        assert got["Body"].read() == body
        assert got["ETag"] == etag and got["ContentType"] == "text/x-test" and got["Metadata"] == {"origin": "test"}
        ranged = s3.get_object(Bucket="data", Key="dir/obj", Range=f"bytes={MIB - 3}-{2 * MIB + 2}")["Body"].read()
        assert ranged == body[MIB - 3:2 * MIB + 3]
        listed = s3.list_objects_v2(Bucket="data", Prefix="dir/")["Contents"]
        assert [(o["Key"], o["Size"], o["ETag"]) for o in listed] == [("dir/obj", len(body), etag)]
        seen = status(journal)
        assert seen["gateway_running"] and seen["dirty_objects"] == 1 and seen["dirty_bytes"] == len(body)
        assert seen["buckets"][0]["bucket"] == "data"
        modified = got["LastModified"]

        assert wait_for_file(data / "dir" / "obj", body)
        seen = status(journal)
        assert seen["dirty_objects"] == 0 and seen["dirty_bytes"] == 0 and seen["failing"] == 0
        head = s3.head_object(Bucket="data", Key="dir/obj")
        assert head["ETag"] == etag and head["LastModified"] == modified
        assert head["Metadata"] == {"origin": "test"}
        assert s3.get_object(Bucket="data", Key="dir/obj")["Body"].read() == body

        # A delete before the flush: the object never reaches the directory.
        s3.put_object(Bucket="data", Key="gone", Body=b"short-lived")
        s3.delete_object(Bucket="data", Key="gone")
        assert "Contents" not in s3.list_objects_v2(Bucket="data", Prefix="gone")
        time.sleep(3)
        assert not (data / "gone").exists()
        assert status(journal)["dirty_objects"] == 0
        assert g.poll() is None
    finally:
        close(g)
        close(owner)


def test_a_gateway_sigkilled_after_the_answer_loses_nothing(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    owner, owner_address, _ = start(["up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0",
                                     "--data-dir", str(tmp_path / "state")], r"sluice up: listening on (\S+)")
    journal = tmp_path / "journal.db"
    bodies = {"small": pattern(4096, 2), "big": pattern(9 * MIB + 1, 3), "empty": b""}
    try:
        # A flush delay of an hour: nothing reaches the files before the kill.
        g, address, _ = gateway(data, journal, owner_address, "--flush-delay", "1h")
        s3 = s3_client(address)
        for key, body in bodies.items():
            s3.put_object(Bucket="data", Key=key, Body=body)
        kill(g)
        assert sorted(os.listdir(data)) == []
        seen = status(journal)
        assert not seen["gateway_running"]
        assert seen["dirty_objects"] == 3 and seen["dirty_bytes"] == sum(len(b) for b in bodies.values())

        g, address, text = gateway(data, journal, owner_address, "--flush-delay", "0s")
        assert "(3 objects, " in text, text
        s3 = s3_client(address)
        for key, body in bodies.items():
            assert s3.get_object(Bucket="data", Key=key)["Body"].read() == body
        for key, body in bodies.items():
            assert wait_for_file(data / key, body), key
        assert status(journal)["dirty_objects"] == 0
        assert g.poll() is None
        close(g)
    finally:
        close(owner)


def test_an_owner_sigkilled_with_its_gateway_loses_nothing_with_two_copies(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    master, master_address, _ = start(["master", "--listen", "127.0.0.1:0", "--in-memory"],
                                      r"sluice master: listening on (\S+)")
    owners = []
    try:
        for _ in range(2):
            proc, address, _ = start(["owner", "--listen", "127.0.0.1:0", "--master", master_address],
                                     r"sluice owner: listening on (\S+)")
            owners.append((proc, address))
        journal = tmp_path / "journal.db"
        g, address, _ = gateway(data, journal, owners[0][1], "--flush-delay", "1h", "--write-back-copies", "2")
        s3 = s3_client(address)
        body = pattern(6 * MIB + 7, 4)
        s3.put_object(Bucket="data", Key="obj", Body=body)
        # The host of the gateway goes: its owner and the gateway with it.
        kill(g)
        kill(owners[0][0])
        proc, address, _ = start(["owner", "--listen", "127.0.0.1:0", "--master", master_address],
                                 r"sluice owner: listening on (\S+)")
        owners[0] = (proc, address)
        g, address, _ = gateway(data, journal, owners[0][1], "--flush-delay", "0s")
        s3 = s3_client(address)
        assert s3.get_object(Bucket="data", Key="obj")["Body"].read() == body
        assert wait_for_file(data / "obj", body)
        assert status(journal)["dirty_objects"] == 0
        close(g)
    finally:
        for proc, _ in owners:
            close(proc)
        close(master)


def test_write_back_needs_an_owner_and_a_journal_and_refuses_bad_settings(tmp_path):
    def s3(*extra):
        return subprocess.run([SLUICE_BINARY, "s3", "--listen", "127.0.0.1:0", "--bucket", f"data={tmp_path}",
                               "--anonymous", *extra], capture_output=True, text=True, timeout=60)

    done = s3("--write-back", "data", "--journal", str(tmp_path / "j.db"))
    assert done.returncode == 2 and "give the owner (--owner HOST:PORT)" in done.stderr, done.stderr
    done = s3("--write-back", "data", "--flush-delay", "soon")
    assert done.returncode == 2 and "--flush-delay" in done.stderr, done.stderr
    done = s3("--write-back", "data", "--write-back-copies", "0")
    assert done.returncode == 2, done.stderr
    done = subprocess.run([SLUICE_BINARY, "s3", "status", "--journal", str(tmp_path / "none.db")],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "there is no write-back journal" in done.stderr, done.stderr


def test_with_one_copy_an_owner_lost_before_the_flush_is_reported_not_hidden(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    master, master_address, _ = start(["master", "--listen", "127.0.0.1:0", "--in-memory"],
                                      r"sluice master: listening on (\S+)")
    owner, owner_address, _ = start(["owner", "--listen", "127.0.0.1:0", "--master", master_address],
                                    r"sluice owner: listening on (\S+)")
    journal = tmp_path / "journal.db"
    g = None
    try:
        g, address, _ = gateway(data, journal, owner_address, "--flush-delay", "1h")
        s3_client(address).put_object(Bucket="data", Key="obj", Body=b"x" * 1000)
        kill(g)
        kill(owner)
        owner, owner_address, _ = start(["owner", "--listen", "127.0.0.1:0", "--master", master_address],
                                        r"sluice owner: listening on (\S+)")
        g, address, _ = gateway(data, journal, owner_address, "--flush-delay", "0s")
        from botocore.exceptions import ClientError
        try:
            s3_client(address).get_object(Bucket="data", Key="obj")
            raise AssertionError("a lost object was served")
        except ClientError as e:
            assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 503, e.response
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and status(journal)["failing"] == 0:
            time.sleep(0.1)
        seen = status(journal)
        assert seen["failing"] == 1 and seen["dirty_objects"] == 1
        assert seen["failures"][0]["key"] == "obj" and "chunk 0 of 1" in seen["failures"][0]["error"]
        assert not (data / "obj").exists()
        # Deleting it is how a user gives it up.
        s3_client(address).delete_object(Bucket="data", Key="obj")
        assert status(journal)["dirty_objects"] == 0
    finally:
        if g is not None and g.poll() is None:
            close(g)
        close(owner)
        close(master)
