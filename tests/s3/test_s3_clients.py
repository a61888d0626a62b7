"""`sluice s3` against the S3 command-line clients Debian ships: awscli 2
(/usr/bin/aws), s3cmd and rclone, each run unchanged as a subprocess
against a gateway that checks SigV4 signatures. Every client runs with a
scrubbed environment (its own HOME and config files in the test's temp
directory), so nothing of the user's configuration is read. A test whose
client is not installed is skipped, with the reason.

Each test checks what the client says against the bytes on disk and the
ETags S3 defines, so a gateway that answers wrongly fails it."""

import hashlib
import os
import shutil
import subprocess

import pytest

from conftest import HAVE_BOTO3, Gateway

KEY, SECRET = "AKIDCLIENTTEST", "client/secret+with=odd chars"
MIB = 1024 * 1024


def tool(name):
    """The Debian-installed client `name`, or a skip saying how to get it."""
    path = shutil.which(name, path="/usr/bin:/bin")
    if path is None:
        pytest.skip(f"/usr/bin/{name} is not installed (scripts/bootstrap.sh installs it)")
    return path


@pytest.fixture
def signed(tmp_path):
    g = Gateway(str(tmp_path), access=(KEY, SECRET))
    yield g
    assert g.alive(), "the gateway exited during the test"
    g.stop()


@pytest.fixture
def work(tmp_path):
    """A directory for the files the clients upload and download."""
    d = tmp_path / "work"
    d.mkdir()
    return d


def clean_env(tmp_path, **extra):
    """An environment with nothing inherited but a Debian PATH: no AWS_*,
    proxy or CA-bundle variables of the caller's reach the client."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", "TZ": "UTC"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(args, env, cwd=None, ok=True, binary=False):
    r = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=not binary, timeout=300)
    if ok:
        assert r.returncode == 0, f"{args} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r


def md5_etag(data):
    return '"' + hashlib.md5(data).hexdigest() + '"'


def multipart_etag(data, part_bytes):
    parts = [data[i:i + part_bytes] for i in range(0, len(data), part_bytes)]
    digests = b"".join(hashlib.md5(p).digest() for p in parts)
    return '"' + hashlib.md5(digests).hexdigest() + "-" + str(len(parts)) + '"'


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


# awscli 2 ---------------------------------------------------------------


def aws(gateway, tmp_path):
    """A function running `/usr/bin/aws --endpoint-url ... ARGS`."""
    exe = tool("aws")
    env = clean_env(tmp_path, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET, AWS_DEFAULT_REGION="us-east-1",
                    AWS_CONFIG_FILE=tmp_path / "aws-config", AWS_SHARED_CREDENTIALS_FILE=tmp_path / "aws-credentials",
                    AWS_PAGER="", AWS_MAX_ATTEMPTS=1)

    def call(*args, ok=True, cwd=None):
        return run([exe, "--endpoint-url", gateway.endpoint, "--no-cli-pager", *args], env, cwd=cwd, ok=ok)

    return call


def s3api_json(call, *args):
    import json

    out = call("s3api", *args, "--output", "json").stdout
    return json.loads(out) if out.strip() else {}  # awscli prints nothing for an empty answer


def test_awscli_makes_lists_copies_removes_objects_and_buckets(signed, tmp_path, work):
    a = aws(signed, tmp_path)
    a("s3", "mb", "s3://cli-bucket")
    assert os.path.isdir(os.path.join(signed.root_dir, "cli-bucket"))
    assert "cli-bucket" in a("s3", "ls").stdout.split()
    body = os.urandom(70_000)
    write(work / "up.bin", body)
    a("s3", "cp", "--only-show-errors", str(work / "up.bin"), "s3://cli-bucket/dir/up.bin")
    assert read(os.path.join(signed.root_dir, "cli-bucket", "dir", "up.bin")) == body
    listed = a("s3", "ls", "--recursive", "s3://cli-bucket").stdout.split()
    assert listed[-2:] == [str(len(body)), "dir/up.bin"]
    a("s3", "cp", "--only-show-errors", "s3://cli-bucket/dir/up.bin", str(work / "down.bin"))
    assert read(work / "down.bin") == body
    a("s3", "rm", "--only-show-errors", "s3://cli-bucket/dir/up.bin")
    assert a("s3", "ls", "--recursive", "s3://cli-bucket").stdout == ""
    assert not os.path.exists(os.path.join(signed.root_dir, "cli-bucket", "dir"))
    a("s3", "rb", "s3://cli-bucket")
    assert "cli-bucket" not in a("s3", "ls").stdout.split()
    assert not os.path.exists(os.path.join(signed.root_dir, "cli-bucket"))
    # An error is an error to the client too.
    r = a("s3", "cp", "--only-show-errors", "s3://data/never-there", str(work / "x"), ok=False)
    assert r.returncode != 0 and "404" in r.stderr


def test_awscli_uploads_a_file_over_8_mib_in_parts_with_a_multipart_etag(signed, tmp_path, work):
    a = aws(signed, tmp_path)
    body = os.urandom(20 * MIB)  # awscli's threshold and part size are 8 MiB: parts of 8, 8 and 4
    write(work / "big.bin", body)
    a("s3", "cp", "--only-show-errors", str(work / "big.bin"), "s3://data/big.bin")
    assert read(os.path.join(signed.data_dir, "big.bin")) == body
    head = s3api_json(a, "head-object", "--bucket", "data", "--key", "big.bin")
    assert head["ETag"] == multipart_etag(body, 8 * MIB)
    assert head["ContentLength"] == len(body)
    a("s3", "cp", "--only-show-errors", "s3://data/big.bin", str(work / "back.bin"))
    assert read(work / "back.bin") == body
    assert s3api_json(a, "list-multipart-uploads", "--bucket", "data").get("Uploads", []) == []
    assert not os.path.exists(os.path.join(signed.data_dir, ".sluice-uploads")) or \
        os.listdir(os.path.join(signed.data_dir, ".sluice-uploads")) == []


def test_awscli_copies_an_object_over_8_mib_between_buckets_in_parts(signed, tmp_path, work):
    a = aws(signed, tmp_path)
    body = os.urandom(20 * MIB)
    write(work / "big.bin", body)
    a("s3", "cp", "--only-show-errors", str(work / "big.bin"), "s3://data/big.bin")
    a("s3", "mb", "s3://copies")
    # Over the threshold awscli copies server-side with UploadPartCopy (8 MiB
    # source ranges), after asking for the source's tags.
    a("s3", "cp", "--only-show-errors", "s3://data/big.bin", "s3://copies/big.bin")
    assert read(os.path.join(signed.root_dir, "copies", "big.bin")) == body
    head = s3api_json(a, "head-object", "--bucket", "copies", "--key", "big.bin")
    assert head["ETag"] == multipart_etag(body, 8 * MIB)
    a("s3", "mv", "--only-show-errors", "s3://copies/big.bin", "s3://data/moved.bin")
    assert read(os.path.join(signed.data_dir, "moved.bin")) == body
    assert not os.path.exists(os.path.join(signed.root_dir, "copies", "big.bin"))


def tree_of(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root)] = read(p)
    return out


def test_awscli_sync_copies_only_what_changed_and_deletes_when_asked(signed, tmp_path, work):
    a = aws(signed, tmp_path)
    src = work / "src"
    files = {"top.txt": b"top", "a/one.bin": os.urandom(5000), "a/b/two.txt": b"two", "a/b/three": b""}
    for name, data in files.items():
        write(src / name, data)
    out = a("s3", "sync", "--no-progress", str(src), "s3://data/tree").stdout
    assert out.count("upload:") == len(files)
    assert tree_of(os.path.join(signed.data_dir, "tree")) == files
    assert a("s3", "sync", "--no-progress", str(src), "s3://data/tree").stdout == ""  # nothing changed
    write(src / "a/b/two.txt", b"two, longer now")
    os.remove(src / "top.txt")
    out = a("s3", "sync", "--no-progress", "--delete", str(src), "s3://data/tree").stdout
    assert sorted(line.split()[0] for line in out.splitlines()) == ["delete:", "upload:"]
    files["a/b/two.txt"] = b"two, longer now"
    del files["top.txt"]
    assert tree_of(os.path.join(signed.data_dir, "tree")) == files
    a("s3", "sync", "--no-progress", "s3://data/tree", str(work / "dst"))
    assert tree_of(work / "dst") == files


def test_awscli_s3api_head_object_and_ranged_get_object(signed, tmp_path, work):
    a = aws(signed, tmp_path)
    body = os.urandom(10_000)
    write(work / "obj", body)
    put = s3api_json(a, "put-object", "--bucket", "data", "--key", "ranged/obj", "--body", str(work / "obj"),
                     "--content-type", "application/x-ranged", "--metadata", "owner=tests")
    assert put["ETag"] == md5_etag(body)
    head = s3api_json(a, "head-object", "--bucket", "data", "--key", "ranged/obj")
    assert head["ETag"] == md5_etag(body)
    assert head["ContentLength"] == len(body)
    assert head["ContentType"] == "application/x-ranged"
    assert head["Metadata"] == {"owner": "tests"}
    got = s3api_json(a, "get-object", "--bucket", "data", "--key", "ranged/obj", "--range", "bytes=100-1099",
                     str(work / "part"))
    assert got["ContentRange"] == f"bytes 100-1099/{len(body)}"
    assert got["ContentLength"] == 1000
    assert read(work / "part") == body[100:1100]
    s3api_json(a, "get-object", "--bucket", "data", "--key", "ranged/obj", "--range", "bytes=-10", str(work / "tail"))
    assert read(work / "tail") == body[-10:]
    r = a("s3api", "head-object", "--bucket", "data", "--key", "ranged/none", ok=False)
    assert r.returncode != 0 and "404" in r.stderr
    # A flexible checksum goes in a header over HTTP (x-amz-checksum-crc32): accepted, the object stored.
    put = s3api_json(a, "put-object", "--bucket", "data", "--key", "summed", "--body", str(work / "obj"),
                     "--checksum-algorithm", "CRC32")
    assert put["ETag"] == md5_etag(body)
    assert read(os.path.join(signed.data_dir, "summed")) == body


# s3cmd ------------------------------------------------------------------


def s3cmd(gateway, tmp_path):
    exe = tool("s3cmd")
    config = tmp_path / "s3cfg"
    # host_bucket without %(bucket)s: path-style addressing.
    config.write_text("[default]\n"
                      f"access_key = {KEY}\n"
                      f"secret_key = {SECRET}\n"
                      f"host_base = {gateway.address}\n"
                      f"host_bucket = {gateway.address}\n"
                      "use_https = False\n"
                      "bucket_location = us-east-1\n"
                      "signature_v2 = False\n")
    env = clean_env(tmp_path)

    def call(*args, ok=True):
        return run([exe, "-c", str(config), "--no-progress", *args], env, ok=ok)

    return call


def test_s3cmd_puts_gets_lists_shows_and_deletes(signed, tmp_path, work):
    s = s3cmd(signed, tmp_path)
    s("mb", "s3://s3cmd-bucket")
    small = os.urandom(3000)
    big = os.urandom(12 * MIB)
    write(work / "small.bin", small)
    write(work / "big.bin", big)
    s("put", str(work / "small.bin"), "s3://s3cmd-bucket/small.bin")
    s("put", "--multipart-chunk-size-mb=5", str(work / "big.bin"), "s3://s3cmd-bucket/dir/big.bin")  # 3 parts
    bucket_dir = os.path.join(signed.root_dir, "s3cmd-bucket")
    assert read(os.path.join(bucket_dir, "small.bin")) == small
    assert read(os.path.join(bucket_dir, "dir", "big.bin")) == big
    listed = s("ls", "--recursive", "--list-md5", "s3://s3cmd-bucket").stdout.splitlines()
    rows = sorted((line.split()[2], line.split()[3].strip('"'), line.split()[4]) for line in listed)
    # s3cmd shows a multipart object by the MD5 of its whole content, kept in its own x-amz-meta-s3cmd-attrs.
    assert rows == [(str(len(big)), hashlib.md5(big).hexdigest(), "s3://s3cmd-bucket/dir/big.bin"),
                    (str(len(small)), hashlib.md5(small).hexdigest(), "s3://s3cmd-bucket/small.bin")]
    info = s("info", "s3://s3cmd-bucket/small.bin").stdout
    assert f"File size: {len(small)}" in info
    assert f"MD5 sum:   {hashlib.md5(small).hexdigest()}" in info
    s("get", str("s3://s3cmd-bucket/dir/big.bin"), str(work / "big.back"))
    assert read(work / "big.back") == big
    s("get", str("s3://s3cmd-bucket/small.bin"), str(work / "small.back"))
    assert read(work / "small.back") == small
    s("del", "s3://s3cmd-bucket/small.bin", "s3://s3cmd-bucket/dir/big.bin")
    assert s("ls", "--recursive", "s3://s3cmd-bucket").stdout == ""
    assert os.listdir(bucket_dir) == []
    r = s("get", "s3://s3cmd-bucket/small.bin", str(work / "gone"), ok=False)
    assert r.returncode != 0
    s("rb", "s3://s3cmd-bucket")
    assert not os.path.exists(bucket_dir)


# rclone -----------------------------------------------------------------


def rclone(gateway, tmp_path):
    exe = tool("rclone")
    config = tmp_path / "rclone.conf"
    config.write_text("")
    env = clean_env(tmp_path, RCLONE_CONFIG=config, RCLONE_CONFIG_X_TYPE="s3", RCLONE_CONFIG_X_PROVIDER="Other",
                    RCLONE_CONFIG_X_ACCESS_KEY_ID=KEY, RCLONE_CONFIG_X_SECRET_ACCESS_KEY=SECRET,
                    RCLONE_CONFIG_X_REGION="us-east-1", RCLONE_CONFIG_X_ENDPOINT=gateway.endpoint,
                    RCLONE_CONFIG_X_FORCE_PATH_STYLE="true", RCLONE_LOW_LEVEL_RETRIES=1, RCLONE_RETRIES=1)

    def call(*args, ok=True, binary=False):
        return run([exe, *args], env, ok=ok, binary=binary)

    return call


def test_rclone_copies_lists_reads_checks_and_deletes(signed, tmp_path, work):
    r = rclone(signed, tmp_path)
    src = work / "src"
    files = {"top.txt": b"top", "a/one.bin": os.urandom(40_000), "a/b/two.txt": b"two"}
    for name, data in files.items():
        write(src / name, data)
    r("mkdir", "x:rclone-bucket")
    bucket_dir = os.path.join(signed.root_dir, "rclone-bucket")
    assert os.path.isdir(bucket_dir)
    r("copy", str(src), "x:rclone-bucket/tree")
    assert tree_of(os.path.join(bucket_dir, "tree")) == files
    ls = sorted(tuple(line.split()) for line in r("ls", "x:rclone-bucket").stdout.splitlines())
    assert ls == sorted((str(len(d)), "tree/" + n) for n, d in files.items())
    lsl = {line.split()[-1]: line.split()[0] for line in r("lsl", "x:rclone-bucket/tree").stdout.splitlines()}
    assert lsl == {n: str(len(d)) for n, d in files.items()}
    md5s = {line.split()[1]: line.split()[0] for line in r("md5sum", "x:rclone-bucket/tree").stdout.splitlines()}
    assert md5s == {n: hashlib.md5(d).hexdigest() for n, d in files.items()}  # the ETags
    assert r("cat", "x:rclone-bucket/tree/a/one.bin", binary=True).stdout == files["a/one.bin"]
    assert r("cat", "--offset", "100", "--count", "50", "x:rclone-bucket/tree/a/one.bin",
             binary=True).stdout == files["a/one.bin"][100:150]
    r("check", str(src), "x:rclone-bucket/tree")
    # Changed behind the gateway's back: rclone sees a new size and ETag.
    write(os.path.join(bucket_dir, "tree", "a", "b", "two.txt"), b"changed on disk")
    assert r("check", str(src), "x:rclone-bucket/tree", ok=False).returncode != 0
    r("copy", "x:rclone-bucket/tree", str(work / "dst"))
    files["a/b/two.txt"] = b"changed on disk"
    assert tree_of(work / "dst") == files
    r("delete", "x:rclone-bucket/tree/a")
    assert r("ls", "x:rclone-bucket").stdout.split() == ["3", "tree/top.txt"]
    assert not os.path.exists(os.path.join(bucket_dir, "tree", "a"))


def test_rclone_uploads_a_large_file_in_parts_and_reads_it_back(signed, tmp_path, work):
    r = rclone(signed, tmp_path)
    body = os.urandom(12 * MIB)
    write(work / "big.bin", body)
    r("copy", "--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M", str(work / "big.bin"), "x:data/")  # 3 parts
    assert read(os.path.join(signed.data_dir, "big.bin")) == body
    assert r("ls", "x:data").stdout.split() == [str(len(body)), "big.bin"]
    r("check", str(work), "x:data")  # size and the MD5 rclone stores beside a multipart object
    r("copy", "x:data/big.bin", str(work / "back"))
    assert read(work / "back" / "big.bin") == body
    s3 = signed.client(KEY, SECRET) if HAVE_BOTO3 else None
    if s3 is not None:
        assert s3.head_object(Bucket="data", Key="big.bin")["ETag"] == multipart_etag(body, 5 * MIB)


def test_rclone_copies_server_side_in_parts(signed, tmp_path, work):
    r = rclone(signed, tmp_path)
    body = os.urandom(12 * MIB)
    write(work / "big.bin", body)
    r("copy", str(work / "big.bin"), "x:data/")
    # Over --s3-copy-cutoff rclone copies with UploadPartCopy, 5 MiB ranges.
    r("copyto", "--s3-copy-cutoff", "5M", "x:data/big.bin", "x:data/copy/big.bin")
    assert read(os.path.join(signed.data_dir, "copy", "big.bin")) == body
    r("check", str(work), "x:data/copy")
    if HAVE_BOTO3:
        head = signed.client(KEY, SECRET).head_object(Bucket="data", Key="copy/big.bin")
        assert head["ETag"] == multipart_etag(body, 5 * MIB)
