"""`sluice s3` under load and at its bounds: readers racing a writer see
whole objects, the connection and time bounds answer with S3 errors, and
paths that cannot be objects are refused or left out."""

import hashlib
import os
import socket
import threading
import time

import pytest

from conftest import ClientError, Gateway, requires_boto3

pytestmark = requires_boto3


def test_readers_racing_a_writer_see_the_old_object_or_the_new_never_part(gateway):
    versions = {b"a" * (1 << 20): None, b"b" * (3 << 20): None}
    for body in versions:
        versions[body] = '"' + hashlib.md5(body).hexdigest() + '"'
    bodies = list(versions)
    writer_s3 = gateway.client()
    writer_s3.put_object(Bucket="data", Key="race", Body=bodies[0])
    stop = threading.Event()
    seen, bad = [], []

    def read():
        s3 = gateway.client()
        while not stop.is_set():
            got = s3.get_object(Bucket="data", Key="race")
            body = got["Body"].read()
            if body not in versions or got["ETag"] != versions[body]:
                bad.append((len(body), got["ETag"]))
            seen.append(len(body))

    readers = [threading.Thread(target=read) for _ in range(3)]
    for t in readers:
        t.start()
    for i in range(30):
        writer_s3.put_object(Bucket="data", Key="race", Body=bodies[i % 2])
    stop.set()
    for t in readers:
        t.join()
    assert bad == []
    assert len(seen) > 0
    assert [n for n in os.listdir(gateway.data_dir)] == ["race"]  # no temp file left


def test_connections_past_the_bound_get_slow_down_and_the_gateway_recovers(tmp_path):
    g = Gateway(str(tmp_path), extra_args=["--connections-max", "2"])
    try:
        held = [socket.create_connection((g.host, int(g.port))) for _ in range(2)]
        time.sleep(0.2)
        extra = socket.create_connection((g.host, int(g.port)))
        extra.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = extra.recv(65536)
        assert answer.startswith(b"HTTP/1.1 503") and b"SlowDown" in answer
        extra.close()
        for s in held:
            s.close()
        deadline = time.monotonic() + 10
        while True:
            try:
                g.client().list_buckets()
                break
            except ClientError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert g.alive()
    finally:
        g.stop()


def test_a_request_header_that_stalls_gets_request_timeout(tmp_path):
    g = Gateway(str(tmp_path), extra_args=["--idle-timeout", "1s"])
    try:
        s = socket.create_connection((g.host, int(g.port)))
        s.settimeout(10)
        s.sendall(b"GET /data HTTP/1.1\r\nHost: x\r\n")  # never finished
        started = time.monotonic()
        answer = s.recv(65536)
        assert b"RequestTimeout" in answer
        assert 0.5 < time.monotonic() - started < 5
        s.close()
        # A body that stops arriving: RequestTimeout, and nothing is left behind.
        s = socket.create_connection((g.host, int(g.port)))
        s.settimeout(10)
        s.sendall(b"PUT /data/stalled HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
        answer = s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 400") and b"RequestTimeout" in answer
        s.close()
        assert os.listdir(os.path.join(str(tmp_path), "data")) == []
        # An idle keep-alive connection is closed without a word.
        idle = socket.create_connection((g.host, int(g.port)))
        idle.settimeout(10)
        assert idle.recv(100) == b""
        idle.close()
        assert g.client().list_buckets()["Buckets"]
    finally:
        g.stop()


def test_a_key_cannot_be_both_an_object_and_a_directory(gateway, s3):
    s3.put_object(Bucket="data", Key="dir/inner", Body=b"1")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="data", Key="dir", Body=b"2")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    s3.put_object(Bucket="data", Key="file", Body=b"3")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="data", Key="file/inner", Body=b"4")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert s3.get_object(Bucket="data", Key="file")["Body"].read() == b"3"
    assert sorted(os.listdir(gateway.data_dir)) == ["dir", "file"]


def test_files_no_key_could_name_are_left_out_of_listings(gateway, s3):
    with open(os.path.join(gateway.data_dir.encode(), b"not-utf8-\xff"), "wb") as f:
        f.write(b"x")
    os.symlink("/etc/hostname", os.path.join(gateway.data_dir, "link"))
    os.mkfifo(os.path.join(gateway.data_dir, "fifo"))
    s3.put_object(Bucket="data", Key="ok", Body=b"y")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="data")["Contents"]] == ["ok"]
    for key in ("link", "fifo"):
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket="data", Key=key)
        assert e.value.response["Error"]["Code"] == "NoSuchKey"
