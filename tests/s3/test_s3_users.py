"""Users of the gateway, kept in a sqlite file by `sluice s3 user`: each
signs with its own keys, and its grants decide what it may do, bucket by
bucket. Changes count from the next request, while the gateway runs."""

import json
import os
import re
import stat
import subprocess

import pytest

from conftest import SLUICE_BINARY, ClientError, Gateway, requires_boto3

pytestmark = requires_boto3


def user(users, *args, expect=0):
    done = subprocess.run([SLUICE_BINARY, "s3", "user", *args, "--users", users], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == expect, done.stdout + done.stderr
    return done


def add(users, name, *grants):
    out = user(users, "add", name, *[x for g in grants for x in ("--grant", g)]).stdout
    key = re.search(r"access key: (\S+)", out).group(1)
    secret = re.search(r"secret key: (\S+)", out).group(1)
    return key, secret


def code_of(e):
    return e.value.response["Error"]["Code"]


@pytest.fixture
def setup(tmp_path):
    users = str(tmp_path / "users.db")
    writer = add(users, "writer", "data=write")
    reader = add(users, "reader", "data=read")
    g = Gateway(str(tmp_path), users=users)
    os.makedirs(os.path.join(g.root_dir, "other"))
    yield g, users, writer, reader
    assert g.alive(), "the gateway exited during the test"
    g.stop()


def test_each_user_signs_with_its_own_keys_within_its_grants(setup):
    g, users, writer, reader = setup
    w = g.client(*writer)
    r = g.client(*reader)
    w.put_object(Bucket="data", Key="k", Body=b"written")
    assert r.get_object(Bucket="data", Key="k")["Body"].read() == b"written"
    assert [o["Key"] for o in r.list_objects_v2(Bucket="data")["Contents"]] == ["k"]
    with pytest.raises(ClientError) as e:
        r.put_object(Bucket="data", Key="k", Body=b"not allowed")
    assert code_of(e) == "AccessDenied"
    with pytest.raises(ClientError) as e:
        r.delete_object(Bucket="data", Key="k")
    assert code_of(e) == "AccessDenied"
    with pytest.raises(ClientError) as e:
        w.get_object(Bucket="other", Key="x")
    assert code_of(e) == "AccessDenied"
    # A copy needs read on its source: the writer may not copy from 'other'.
    with pytest.raises(ClientError) as e:
        w.copy_object(Bucket="data", Key="c", CopySource={"Bucket": "other", "Key": "x"})
    assert code_of(e) == "AccessDenied"
    # Each lists only the buckets it may read.
    assert [b["Name"] for b in r.list_buckets()["Buckets"]] == ["data"]
    with open(os.path.join(g.data_dir, "k"), "rb") as f:
        assert f.read() == b"written"


def test_unknown_keys_and_wrong_secrets_are_refused(setup):
    g, users, writer, reader = setup
    with pytest.raises(ClientError) as e:
        g.client("SLNOSUCHKEY0000000000", "whatever").list_buckets()
    assert code_of(e) == "InvalidAccessKeyId"
    with pytest.raises(ClientError) as e:
        g.client(writer[0], reader[1]).list_buckets()
    assert code_of(e) == "SignatureDoesNotMatch"
    with pytest.raises(ClientError) as e:
        g.client("anonymous", "anonymous").get_object(Bucket="data", Key="k")
    assert code_of(e) == "InvalidAccessKeyId"


def test_grants_and_removals_count_from_the_next_request(setup):
    g, users, writer, reader = setup
    r = g.client(*reader)
    with pytest.raises(ClientError):
        r.put_object(Bucket="data", Key="later", Body=b"x")
    user(users, "grant", "reader", "data=write", "other=read")
    r.put_object(Bucket="data", Key="later", Body=b"x")
    assert sorted(b["Name"] for b in r.list_buckets()["Buckets"]) == ["data", "other"]
    user(users, "grant", "reader", "data=none")
    with pytest.raises(ClientError) as e:
        r.get_object(Bucket="data", Key="later")
    assert code_of(e) == "AccessDenied"
    user(users, "rm", "reader")
    with pytest.raises(ClientError) as e:
        r.list_buckets()
    assert code_of(e) == "InvalidAccessKeyId"


def test_the_users_file_keeps_secrets_to_itself(setup):
    g, users, writer, reader = setup
    assert stat.S_IMODE(os.stat(users).st_mode) == 0o600
    listed = user(users, "ls").stdout
    assert "writer" in listed and writer[0] in listed and "data=write" in listed
    assert writer[1] not in listed and reader[1] not in listed
    as_json = json.loads(user(users, "ls", "--json").stdout)
    assert [u["name"] for u in as_json] == ["reader", "writer"]
    assert as_json[1]["grants"] == {"data": "write"}
    assert all("secret" not in "".join(u.keys()) for u in as_json)


def test_bad_user_commands_say_what_is_wrong(tmp_path):
    users = str(tmp_path / "u.db")
    assert "no users file" in user(users, "ls", expect=2).stderr
    add(users, "ann")
    assert "already" in user(users, "add", "ann", expect=2).stderr
    assert "a grant is BUCKET=read" in user(users, "add", "bob", "--grant", "data=rw", expect=2).stderr
    assert "not an S3 bucket name" in user(users, "grant", "ann", "Bad_Bucket=read", expect=2).stderr
    assert "no user 'zed'" in user(users, "grant", "zed", "data=read", expect=2).stderr
    assert "no user 'zed'" in user(users, "rm", "zed", expect=2).stderr
    assert "user name" in user(users, "add", "bad name", expect=2).stderr
    done = subprocess.run([SLUICE_BINARY, "s3", "--listen", "127.0.0.1:0", "--bucket", f"data={tmp_path}",
                           "--users", users, "--anonymous"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "exclude each other" in done.stderr
