"""`sluice s3 --access-key K --secret-key S`: requests signed with AWS
SigV4 by boto3 pass; unsigned, wrongly signed, expired or tampered ones
are refused with S3's errors."""

import hashlib
import os
import urllib.error
import urllib.request

import pytest

from conftest import HAVE_BOTO3, ClientError, Gateway, boto3, requires_boto3

if HAVE_BOTO3:
    from botocore import UNSIGNED
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

pytestmark = requires_boto3

KEY, SECRET = "AKIDSLUICETEST", "s3cr3t/with+odd=chars"


@pytest.fixture
def signed(tmp_path):
    g = Gateway(str(tmp_path), access=(KEY, SECRET))
    yield g
    assert g.alive(), "the gateway exited during the test"
    g.stop()


def code_of(excinfo):
    return excinfo.value.response["Error"]["Code"]


def test_requests_signed_with_the_key_pass(signed, tmp_path):
    from boto3.s3.transfer import TransferConfig

    s3 = signed.client(KEY, SECRET)
    s3.put_object(Bucket="data", Key="dir/a b+c.txt", Body=b"signed", Metadata={"m": "1"})
    assert s3.get_object(Bucket="data", Key="dir/a b+c.txt", Range="bytes=0-1")["Body"].read() == b"si"
    listed = s3.list_objects_v2(Bucket="data", Prefix="dir/", Delimiter="/", MaxKeys=5)
    assert [o["Key"] for o in listed["Contents"]] == ["dir/a b+c.txt"]
    s3.create_bucket(Bucket="made")
    s3.delete_objects(Bucket="data", Delete={"Objects": [{"Key": "dir/a b+c.txt"}]})
    big = tmp_path / "big"
    big.write_bytes(os.urandom(9 * 1024 * 1024))
    s3.upload_file(str(big), "made", "big", Config=TransferConfig(multipart_threshold=8 * 1024 * 1024))
    assert s3.head_object(Bucket="made", Key="big")["ETag"].endswith('-2"')


def test_unsigned_and_wrongly_signed_requests_are_refused(signed):
    s3 = signed.client(KEY, SECRET)
    s3.put_object(Bucket="data", Key="k", Body=b"v")
    with pytest.raises(ClientError) as e:
        signed.client(KEY, "not the secret").get_object(Bucket="data", Key="k")
    assert code_of(e) == "SignatureDoesNotMatch"
    with pytest.raises(ClientError) as e:
        signed.client("SOMEONEELSE", SECRET).get_object(Bucket="data", Key="k")
    assert code_of(e) == "InvalidAccessKeyId"
    with pytest.raises(ClientError) as e:
        signed.client(signature_version=UNSIGNED).get_object(Bucket="data", Key="k")
    assert code_of(e) == "AccessDenied"
    with pytest.raises(ClientError) as e:
        boto3.client("s3", endpoint_url=signed.endpoint, region_name="eu-west-1", aws_access_key_id=KEY,
                     aws_secret_access_key=SECRET).get_object(Bucket="data", Key="k")
    assert code_of(e) == "AuthorizationHeaderMalformed"
    assert s3.get_object(Bucket="data", Key="k")["Body"].read() == b"v"


def test_presigned_urls_work_until_they_expire_or_are_changed(signed):
    s3 = signed.client(KEY, SECRET, signature_version="s3v4")  # boto3 presigns with SigV2 unless told
    s3.put_object(Bucket="data", Key="shared", Body=b"for a link")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "data", "Key": "shared"}, ExpiresIn=300)
    assert urllib.request.urlopen(url, timeout=10).read() == b"for a link"
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url.replace("shared", "sharee"), timeout=10)
    assert e.value.code == 403 and b"SignatureDoesNotMatch" in e.value.read()
    expired = s3.generate_presigned_url("get_object", Params={"Bucket": "data", "Key": "shared"}, ExpiresIn=1)
    import time

    time.sleep(2.1)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(expired, timeout=10)
    assert e.value.code == 403 and b"expired" in e.value.read()
    v2 = signed.client(KEY, SECRET).generate_presigned_url("get_object", Params={"Bucket": "data", "Key": "shared"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(v2, timeout=10)
    assert e.value.code == 400 and b"SigV4" in e.value.read()


def test_a_body_that_is_not_the_one_signed_is_refused(signed):
    signed_body = b"the body that was signed"
    url = signed.endpoint + "/data/swapped"
    request = AWSRequest(method="PUT", url=url, data=signed_body,
                         headers={"x-amz-content-sha256": hashlib.sha256(signed_body).hexdigest()})
    S3SigV4Auth(Credentials(KEY, SECRET), "s3", "us-east-1").add_auth(request)
    prepared = request.prepare()
    swapped = b"another body, same length!"[:len(signed_body)]
    out = urllib.request.Request(url, data=swapped, method="PUT", headers=dict(prepared.headers))
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(out, timeout=10)
    assert e.value.code == 400 and b"XAmzContentSHA256Mismatch" in e.value.read()
    assert not os.path.exists(os.path.join(signed.data_dir, "swapped"))
    assert os.listdir(signed.data_dir) == []
    good = urllib.request.Request(url, data=signed_body, method="PUT", headers=dict(prepared.headers))
    assert urllib.request.urlopen(good, timeout=10).status == 200
    assert signed.client(KEY, SECRET).get_object(Bucket="data", Key="swapped")["Body"].read() == signed_body
