"""`sluice s3` against Debian's boto3: the gateway as an S3 client sees it,
with the backing directory checked on disk."""

import datetime
import hashlib
import http.client
import os
import subprocess
import time

import pytest

from conftest import SLUICE_BINARY, ClientError, requires_boto3

pytestmark = requires_boto3


def error_code(excinfo):
    return excinfo.value.response["Error"]["Code"]


def status_of(excinfo):
    return excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"]


def raw(gateway, method, target, body=None, headers=None):
    conn = http.client.HTTPConnection(gateway.host, int(gateway.port), timeout=10)
    conn.request(method, target, body=body, headers=headers or {})
    r = conn.getresponse()
    out = (r.status, dict(r.getheaders()), r.read())
    conn.close()
    return out


def test_put_get_head_delete_keep_bytes_etag_and_headers(gateway, s3):
    body = os.urandom(100_000)
    put = s3.put_object(Bucket="data", Key="dir/sub/blob.bin", Body=body, ContentType="application/x-test",
                        ContentEncoding="identity", ContentDisposition="attachment", CacheControl="no-cache",
                        Metadata={"owner": "tests", "step": "7"})
    etag = '"' + hashlib.md5(body).hexdigest() + '"'
    assert put["ETag"] == etag
    with open(os.path.join(gateway.data_dir, "dir", "sub", "blob.bin"), "rb") as f:
        assert f.read() == body  # the key is a path in the backing directory
    got = s3.get_object(Bucket="data", Key="dir/sub/blob.bin")
    assert got["Body"].read() == body
    head = s3.head_object(Bucket="data", Key="dir/sub/blob.bin")
    for r in (got, head):
        assert r["ETag"] == etag
        assert r["ContentLength"] == len(body)
        assert r["ContentType"] == "application/x-test"
        assert r["ContentEncoding"] == "identity"
        assert r["ContentDisposition"] == "attachment"
        assert r["CacheControl"] == "no-cache"
        assert r["Metadata"] == {"owner": "tests", "step": "7"}
    listed = s3.list_objects_v2(Bucket="data", Prefix="dir/")["Contents"]
    assert [(o["Key"], o["ETag"], o["Size"]) for o in listed] == [("dir/sub/blob.bin", etag, len(body))]
    s3.delete_object(Bucket="data", Key="dir/sub/blob.bin")
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="data", Key="dir/sub/blob.bin")
    assert error_code(e) == "NoSuchKey"
    assert not os.path.exists(os.path.join(gateway.data_dir, "dir"))  # emptied directories go too
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket="data", Key="dir/sub/blob.bin")
    assert status_of(e) == 404
    s3.delete_object(Bucket="data", Key="never-there")  # S3 answers 204 for absent keys too


def test_buckets_are_listed_created_and_deleted_only_when_empty(gateway, s3):
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["data"]
    s3.create_bucket(Bucket="made-here")
    assert os.path.isdir(os.path.join(gateway.root_dir, "made-here"))
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["data", "made-here"]
    s3.head_bucket(Bucket="made-here")
    assert s3.get_bucket_location(Bucket="made-here")["LocationConstraint"] is None
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket="made-here")
    assert error_code(e) == "BucketAlreadyOwnedByYou"
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket="Not_Valid")
    assert error_code(e) == "InvalidBucketName"
    s3.put_object(Bucket="made-here", Key="a/b", Body=b"x")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket="made-here")
    assert error_code(e) == "BucketNotEmpty"
    s3.delete_object(Bucket="made-here", Key="a/b")
    s3.delete_bucket(Bucket="made-here")
    assert not os.path.exists(os.path.join(gateway.root_dir, "made-here"))
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket="made-here")
    assert status_of(e) == 404
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket="no-such-bucket")
    assert error_code(e) == "NoSuchBucket"
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket="data")  # an exported directory is never removed
    assert error_code(e) == "AccessDenied"


def test_listing_with_prefix_delimiter_and_pagination(s3):
    keys = sorted(["a-c", "a/b", "a/c/d", "a/c/e", "b", "photos/2024/x.jpg", "photos/2025/y.jpg", "z"]
                  + [f"many/{i:03}" for i in range(25)])
    for k in keys:
        s3.put_object(Bucket="data", Key=k, Body=k.encode())
    everything = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="data", PaginationConfig={"PageSize": 4}):
        assert page["KeyCount"] <= 4
        everything += [o["Key"] for o in page.get("Contents", [])]
    assert everything == keys  # bytewise order across directories: "a-c" before "a/b"
    top = s3.list_objects_v2(Bucket="data", Delimiter="/")
    assert [o["Key"] for o in top["Contents"]] == ["a-c", "b", "z"]
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["a/", "many/", "photos/"]
    photos = s3.list_objects_v2(Bucket="data", Prefix="photos/", Delimiter="/")
    assert [p["Prefix"] for p in photos["CommonPrefixes"]] == ["photos/2024/", "photos/2025/"]
    assert "Contents" not in photos
    after = s3.list_objects_v2(Bucket="data", Prefix="many/", StartAfter="many/020")
    assert [o["Key"] for o in after["Contents"]] == [f"many/{i:03}" for i in range(21, 25)]
    # Pages of common prefixes and keys mixed, with a delimiter.
    mixed = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="data", Delimiter="/",
                                                             PaginationConfig={"PageSize": 2}):
        mixed += [o["Key"] for o in page.get("Contents", [])] + [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    assert sorted(mixed) == ["a-c", "a/", "b", "many/", "photos/", "z"]
    v1 = []
    for page in s3.get_paginator("list_objects").paginate(Bucket="data", PaginationConfig={"PageSize": 7}):
        v1 += [o["Key"] for o in page.get("Contents", [])]
    assert v1 == keys
    v1_top = []
    for page in s3.get_paginator("list_objects").paginate(Bucket="data", Delimiter="/",
                                                          PaginationConfig={"PageSize": 2}):
        v1_top += [o["Key"] for o in page.get("Contents", [])] + [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    assert sorted(v1_top) == ["a-c", "a/", "b", "many/", "photos/", "z"]


def test_directory_markers_are_directories_listed_before_their_contents(gateway, s3):
    empty_md5 = '"d41d8cd98f00b204e9800998ecf8427e"'
    assert s3.put_object(Bucket="data", Key="folder/", Body=b"")["ETag"] == empty_md5
    assert os.path.isdir(os.path.join(gateway.data_dir, "folder"))
    head = s3.head_object(Bucket="data", Key="folder/")
    assert head["ContentLength"] == 0 and head["ETag"] == empty_md5
    assert s3.get_object(Bucket="data", Key="folder/")["Body"].read() == b""
    s3.put_object(Bucket="data", Key="folder/x", Body=b"x")
    listed = s3.list_objects_v2(Bucket="data", Delimiter="/")
    assert [p["Prefix"] for p in listed["CommonPrefixes"]] == ["folder/"]
    inside = s3.list_objects_v2(Bucket="data", Prefix="folder/")["Contents"]
    assert [(o["Key"], o["Size"]) for o in inside] == [("folder/", 0), ("folder/x", 1)]
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="data", Key="bad/", Body=b"bytes")
    assert e.value.response["Error"]["Code"] == "InvalidArgument"
    assert not os.path.exists(os.path.join(gateway.data_dir, "bad"))
    # Deleting the marker leaves what is under it.
    s3.delete_object(Bucket="data", Key="folder/")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="data", Prefix="folder/")["Contents"]] == ["folder/x"]
    s3.delete_object(Bucket="data", Key="folder/x")
    assert not os.path.exists(os.path.join(gateway.data_dir, "folder"))


def test_keys_with_spaces_plus_and_unicode_round_trip_through_listings(s3):
    keys = ["with space/a+b.txt", "ünïcødé/ключ", "percent%20literal"]
    for k in keys:
        s3.put_object(Bucket="data", Key=k, Body=b"v")
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="data")["Contents"]) == sorted(keys)
    for k in keys:
        assert s3.get_object(Bucket="data", Key=k)["Body"].read() == b"v"


def test_ranges_answer_206_and_unsatisfiable_ones_416(s3):
    body = bytes(range(256)) * 4
    s3.put_object(Bucket="data", Key="r", Body=body)
    r = s3.get_object(Bucket="data", Key="r", Range="bytes=10-19")
    assert r["Body"].read() == body[10:20]
    assert r["ContentRange"] == "bytes 10-19/1024"
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert s3.get_object(Bucket="data", Key="r", Range="bytes=1000-")["Body"].read() == body[1000:]
    assert s3.get_object(Bucket="data", Key="r", Range="bytes=-5")["Body"].read() == body[-5:]
    assert s3.get_object(Bucket="data", Key="r", Range="bytes=1020-5000")["Body"].read() == body[1020:]
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="data", Key="r", Range="bytes=1024-")
    assert error_code(e) == "InvalidRange"
    assert status_of(e) == 416


def test_conditional_requests(gateway, s3):
    etag = s3.put_object(Bucket="data", Key="c", Body=b"conditional")["ETag"]
    assert s3.get_object(Bucket="data", Key="c", IfMatch=etag)["Body"].read() == b"conditional"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="data", Key="c", IfMatch='"0000"')
    assert status_of(e) == 412
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="data", Key="c", IfNoneMatch=etag)
    assert status_of(e) == 304
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket="data", Key="c", IfNoneMatch=etag)
    assert status_of(e) == 304
    future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="data", Key="c", IfModifiedSince=future)
    assert status_of(e) == 304
    assert s3.get_object(Bucket="data", Key="c", IfModifiedSince=past)["Body"].read() == b"conditional"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="data", Key="c", IfUnmodifiedSince=past)
    assert error_code(e) == "PreconditionFailed"
    # If-Range: a matching ETag lets the range apply; another one gets the whole object.
    # (boto3 has no If-Range parameter: raw HTTP.)
    status, _, body = raw(gateway, "GET", "/data/c", headers={"Range": "bytes=0-3", "If-Range": etag})
    assert (status, body) == (206, b"cond")
    status, _, body = raw(gateway, "GET", "/data/c", headers={"Range": "bytes=0-3", "If-Range": '"other"'})
    assert (status, body) == (200, b"conditional")


def test_copy_object_copies_or_replaces_metadata(s3):
    s3.put_object(Bucket="data", Key="src", Body=b"copied bytes", ContentType="text/plain", Metadata={"k": "v"})
    s3.create_bucket(Bucket="other")
    copied = s3.copy_object(Bucket="other", Key="dst", CopySource={"Bucket": "data", "Key": "src"})
    assert copied["CopyObjectResult"]["ETag"] == '"' + hashlib.md5(b"copied bytes").hexdigest() + '"'
    head = s3.head_object(Bucket="other", Key="dst")
    assert head["ContentType"] == "text/plain" and head["Metadata"] == {"k": "v"}
    s3.copy_object(Bucket="data", Key="src", CopySource="data/src", MetadataDirective="REPLACE",
                   ContentType="application/json", Metadata={"new": "1"})
    head = s3.head_object(Bucket="data", Key="src")
    assert head["ContentType"] == "application/json" and head["Metadata"] == {"new": "1"}
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket="data", Key="src", CopySource="data/src")
    assert error_code(e) == "InvalidRequest"
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket="data", Key="x", CopySource="data/missing")
    assert error_code(e) == "NoSuchKey"


def test_delete_objects_removes_many_and_reports_quietly_when_asked(s3):
    for i in range(5):
        s3.put_object(Bucket="data", Key=f"d/{i}", Body=b"x")
    out = s3.delete_objects(Bucket="data", Delete={"Objects": [{"Key": "d/0"}, {"Key": "d/1"}, {"Key": "absent"}]})
    assert sorted(d["Key"] for d in out["Deleted"]) == ["absent", "d/0", "d/1"]
    quiet = s3.delete_objects(Bucket="data", Delete={"Objects": [{"Key": "d/2"}, {"Key": "../up"}], "Quiet": True})
    assert "Deleted" not in quiet
    assert [(e["Key"], e["Code"]) for e in quiet["Errors"]] == [("../up", "InvalidArgument")]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="data")["Contents"]] == ["d/3", "d/4"]


def test_multipart_upload_file_over_8_mib(gateway, s3, tmp_path):
    from boto3.s3.transfer import TransferConfig

    path = tmp_path / "big.bin"
    body = os.urandom(20 * 1024 * 1024 + 12345)
    path.write_bytes(body)
    config = TransferConfig(multipart_threshold=8 * 1024 * 1024, multipart_chunksize=8 * 1024 * 1024)
    s3.upload_file(str(path), "data", "big/file.bin", Config=config)
    head = s3.head_object(Bucket="data", Key="big/file.bin")
    digests = b"".join(hashlib.md5(body[i:i + 8 * 1024 * 1024]).digest() for i in range(0, len(body), 8 * 1024 * 1024))
    assert head["ETag"] == '"' + hashlib.md5(digests).hexdigest() + '-3"'
    assert head["ContentLength"] == len(body)
    with open(os.path.join(gateway.data_dir, "big", "file.bin"), "rb") as f:
        assert f.read() == body
    out = tmp_path / "back.bin"
    s3.download_file("data", "big/file.bin", str(out))
    assert out.read_bytes() == body
    listed = s3.list_objects_v2(Bucket="data")["Contents"]
    assert [(o["Key"], o["ETag"]) for o in listed] == [("big/file.bin", head["ETag"])]  # parts stay hidden
    assert s3.list_multipart_uploads(Bucket="data").get("Uploads", []) == []


def test_multipart_parts_are_checked_listed_and_aborted(s3):
    up = s3.create_multipart_upload(Bucket="data", Key="mp", ContentType="text/x-parts")["UploadId"]
    part = b"p" * (5 * 1024 * 1024)
    e1 = s3.upload_part(Bucket="data", Key="mp", UploadId=up, PartNumber=1, Body=part)["ETag"]
    e2 = s3.upload_part(Bucket="data", Key="mp", UploadId=up, PartNumber=2, Body=b"tail")["ETag"]
    parts = s3.list_parts(Bucket="data", Key="mp", UploadId=up)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in parts] == [(1, e1, len(part)), (2, e2, 4)]
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket="data")["Uploads"]] == [up]
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket="data", Key="mp", UploadId=up, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": '"ffff"'}]})
    assert error_code(e) == "InvalidPart"
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket="data", Key="mp", UploadId=up, MultipartUpload={
            "Parts": [{"PartNumber": 2, "ETag": e2}, {"PartNumber": 1, "ETag": e1}]})
    assert error_code(e) == "InvalidPartOrder"
    done = s3.complete_multipart_upload(Bucket="data", Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    assert done["ETag"].endswith('-2"')
    got = s3.get_object(Bucket="data", Key="mp")
    assert got["Body"].read() == part + b"tail" and got["ContentType"] == "text/x-parts"
    assert got["ETag"] == done["ETag"]
    with pytest.raises(ClientError) as e:
        s3.list_parts(Bucket="data", Key="mp", UploadId=up)
    assert error_code(e) == "NoSuchUpload"
    up2 = s3.create_multipart_upload(Bucket="data", Key="gone")["UploadId"]
    s3.upload_part(Bucket="data", Key="gone", UploadId=up2, PartNumber=1, Body=b"x")
    s3.abort_multipart_upload(Bucket="data", Key="gone", UploadId=up2)
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket="data", Key="gone", UploadId=up2, PartNumber=2, Body=b"x")
    assert error_code(e) == "NoSuchUpload"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket="data", Key="gone")
    assert status_of(e) == 404


def test_a_file_written_behind_the_gateway_is_seen_with_a_new_etag(gateway, s3):
    first = s3.put_object(Bucket="data", Key="ext.txt", Body=b"from the gateway")["ETag"]
    path = os.path.join(gateway.data_dir, "ext.txt")
    with open(path, "wb") as f:
        f.write(b"written by another program")
    got = s3.get_object(Bucket="data", Key="ext.txt")
    assert got["Body"].read() == b"written by another program"
    new = '"' + hashlib.md5(b"written by another program").hexdigest() + '"'
    assert got["ETag"] == new != first
    assert s3.head_object(Bucket="data", Key="ext.txt")["ETag"] == new
    assert s3.list_objects_v2(Bucket="data")["Contents"][0]["ETag"] == new
    # A file that was never the gateway's is an object too.
    with open(os.path.join(gateway.data_dir, "dropped-in"), "wb") as f:
        f.write(b"hello")
    assert s3.get_object(Bucket="data", Key="dropped-in")["ETag"] == '"' + hashlib.md5(b"hello").hexdigest() + '"'


def test_bad_digest_and_bad_keys_are_refused(gateway, s3):
    import base64

    wrong = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="data", Key="k", Body=b"body", ContentMD5=wrong)
    assert error_code(e) == "BadDigest"
    assert os.listdir(gateway.data_dir) == []  # nothing became visible, no temp file is left
    right = base64.b64encode(hashlib.md5(b"body").digest()).decode()
    s3.put_object(Bucket="data", Key="k", Body=b"body", ContentMD5=right)
    for target in ["/data/a/%2e%2e/%2e%2e/escape", "/data/a//b", "/data/trailing/", "/data/.sluice-tmp-x",
                   "/data/%00nul"]:
        status, _, body = raw(gateway, "PUT", target, body=b"x")
        assert status == 400 and b"<Code>InvalidArgument</Code>" in body, target
    status, _, body = raw(gateway, "PUT", "/data/" + "k" * 1025, body=b"x")
    assert status == 400 and b"KeyTooLongError" in body
    assert sorted(os.listdir(os.path.dirname(gateway.data_dir))) == ["data", "root"]
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="data", Key="m", Body=b"x", Metadata={"big": "v" * 3000})
    assert error_code(e) == "MetadataTooLarge"


def test_malformed_xml_and_oversize_headers_get_errors_and_the_gateway_keeps_serving(gateway, s3):
    s3.put_object(Bucket="data", Key="still", Body=b"here")
    status, _, body = raw(gateway, "POST", "/data?delete", body=b"<Delete><Object><Key>still</Key></Obj")
    assert status == 400 and b"<Code>MalformedXML</Code>" in body
    status, _, body = raw(gateway, "POST", "/data?delete", body=b"not xml at all")
    assert status == 400 and b"MalformedXML" in body
    status, _, body = raw(gateway, "POST", "/data/k?uploadId=nope", body=b"<CompleteMultipartUpload/>")
    assert status == 404 and b"NoSuchUpload" in body
    status, _, body = raw(gateway, "GET", "/data/still", headers={"X-Big": "v" * 20000})
    assert status == 400 and b"RequestHeaderSectionTooLarge" in body
    status, _, body = raw(gateway, "PATCH", "/data/still")
    assert status == 405 and b"MethodNotAllowed" in body
    status, _, body = raw(gateway, "GET", "/data?acl")
    assert status == 501 and b"NotImplemented" in body
    status, _, _ = raw(gateway, "GET", "/data/%zz")
    assert status == 400
    assert s3.get_object(Bucket="data", Key="still")["Body"].read() == b"here"
    assert gateway.alive()


def test_keep_alive_connections_carry_many_requests(gateway):
    conn = http.client.HTTPConnection(gateway.host, int(gateway.port), timeout=10)
    for i in range(20):
        conn.request("PUT", f"/data/ka/{i}", body=b"v" * i)
        r = conn.getresponse()
        r.read()
        assert r.status == 200
    conn.request("GET", "/data?list-type=2&prefix=ka/")
    r = conn.getresponse()
    assert r.status == 200 and r.read().count(b"<Key>") == 20
    conn.close()


def test_the_gateway_refuses_to_start_without_anonymous(tmp_path):
    done = subprocess.run([SLUICE_BINARY, "s3", "--listen", "127.0.0.1:0", "--bucket", f"data={tmp_path}"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "--anonymous" in done.stderr
    done = subprocess.run([SLUICE_BINARY, "s3", "--anonymous", "--listen", "127.0.0.1:0", "--bucket",
                           f"data={tmp_path}/missing"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2


def test_temp_files_left_by_a_crash_are_cleaned_at_start(tmp_path):
    from conftest import Gateway

    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / ".sluice-tmp-123-0").write_bytes(b"half an object")
    (data / "kept").write_bytes(b"an object")
    g = Gateway(str(tmp_path))
    try:
        assert not (data / "sub" / ".sluice-tmp-123-0").exists()
        keys = [o["Key"] for o in g.client().list_objects_v2(Bucket="data")["Contents"]]
        assert keys == ["kept"]
    finally:
        g.stop()


def test_virtual_host_addressing_with_a_domain(tmp_path):
    from conftest import Gateway

    g = Gateway(str(tmp_path), extra_args=["--domain", "s3.test"])
    try:
        g.client().put_object(Bucket="data", Key="vh", Body=b"virtual")
        status, _, body = raw(g, "GET", "/vh", headers={"Host": "data.s3.test:" + g.port})
        assert status == 200 and body == b"virtual"
    finally:
        g.stop()
