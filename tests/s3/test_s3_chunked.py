"""aws-chunked (SigV4 streaming) uploads over the wire: a PUT whose body
is signed chunk by chunk, the way the Java and Go SDKs and minio clients
send it, against `sluice s3` checking signatures. The signer here is
written from the SigV4 specification, independent of the gateway's."""

import hashlib
import hmac
import http.client
import os
import time

import pytest

from conftest import HAVE_BOTO3, Gateway

KEY, SECRET = "AKIDCHUNKED", "chunked/secret"
REGION = "us-east-1"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@pytest.fixture
def signed(tmp_path):
    g = Gateway(str(tmp_path), access=(KEY, SECRET))
    yield g
    assert g.alive(), "the gateway exited during the test"
    g.stop()


def hmac256(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signing_key(date):
    k = hmac256(("AWS4" + SECRET).encode(), date)
    for part in (REGION, "s3", "aws4_request"):
        k = hmac256(k, part)
    return k


def chunked_put(gateway, path, payload, chunk_bytes, tamper=None, content_encoding="aws-chunked"):
    """PUTs `payload` as signed aws-chunked chunks; `tamper(body)` may
    change the encoded body before it is sent. Returns (status, body)."""
    amz_date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    date = amz_date[:8]
    scope = f"{date}/{REGION}/s3/aws4_request"
    chunks = [payload[i:i + chunk_bytes] for i in range(0, len(payload), chunk_bytes)] + [b""]
    encoded_length = sum(len(f"{len(c):x};chunk-signature=") + 64 + 2 + len(c) + 2 for c in chunks)
    headers = {
        "host": gateway.address,
        "content-encoding": content_encoding,
        "content-length": str(encoded_length),
        "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        "x-amz-date": amz_date,
        "x-amz-decoded-content-length": str(len(payload)),
    }
    names = sorted(headers)
    canonical = "\n".join(["PUT", path, ""] + [f"{n}:{headers[n]}" for n in names] +
                          ["", ";".join(names), "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = signing_key(date)
    seed = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={KEY}/{scope}, SignedHeaders={';'.join(names)}, "
                                f"Signature={seed}")
    body = b""
    previous = seed
    for c in chunks:
        chunk_to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, previous, EMPTY_SHA256,
                                   hashlib.sha256(c).hexdigest()])
        previous = hmac.new(key, chunk_to_sign.encode(), hashlib.sha256).hexdigest()
        body += f"{len(c):x};chunk-signature={previous}\r\n".encode() + c + b"\r\n"
    assert len(body) == encoded_length
    if tamper:
        body = tamper(body)
    conn = http.client.HTTPConnection(gateway.host, int(gateway.port), timeout=30)
    try:
        conn.request("PUT", path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def test_a_signed_chunked_upload_is_stored_decoded(signed):
    payload = os.urandom(200_000)
    status, body = chunked_put(signed, "/data/streamed.bin", payload, 64 * 1024)
    assert status == 200, body
    with open(os.path.join(signed.data_dir, "streamed.bin"), "rb") as f:
        assert f.read() == payload
    # The ETag is the payload's MD5, and aws-chunked is not kept as the object's Content-Encoding.
    if HAVE_BOTO3:
        head = signed.client(KEY, SECRET).head_object(Bucket="data", Key="streamed.bin")
        assert head["ETag"] == '"' + hashlib.md5(payload).hexdigest() + '"'
        assert "ContentEncoding" not in head
    status, body = chunked_put(signed, "/data/gz.bin", b"x" * 10, 8192, content_encoding="aws-chunked,gzip")
    assert status == 200, body
    if HAVE_BOTO3:
        assert signed.client(KEY, SECRET).head_object(Bucket="data", Key="gz.bin")["ContentEncoding"] == "gzip"


def test_a_chunk_changed_in_flight_is_refused_and_nothing_is_stored(signed):
    payload = os.urandom(150_000)

    def flip(body):
        at = len(body) // 2  # inside the second chunk's data
        return body[:at] + bytes([body[at] ^ 1]) + body[at + 1:]

    status, body = chunked_put(signed, "/data/tampered.bin", payload, 64 * 1024, tamper=flip)
    assert status == 403 and b"SignatureDoesNotMatch" in body
    assert os.listdir(signed.data_dir) == []  # no object, no temp file
