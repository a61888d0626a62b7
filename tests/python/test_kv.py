"""KV through the Python module: every verb, its options and its errors."""

import socket
import time

import pytest

import sluice


def test_bytes_like_values_round_trip(client):
    assert client.put("kv/bytes", b"hello") > 0
    assert bytes(client.get("kv/bytes")) == b"hello"
    client.put("kv/bytearray", bytearray(b"\x00\x01\x02"))
    assert bytes(client.get("kv/bytearray")) == b"\x00\x01\x02"
    client.put("kv/memoryview", memoryview(b"abcdef")[1:4])
    assert bytes(client.get("kv/memoryview")) == b"bcd"
    client.put("kv/str", "grüße")
    assert bytes(client.get("kv/str")).decode() == "grüße"
    client.put("kv/empty", b"")
    empty = client.get("kv/empty")
    assert empty is not None and len(empty) == 0 and bytes(empty) == b""


def test_a_missing_key_gets_none_and_versions_grow(client):
    assert client.get("kv/never-put") is None
    v1 = client.put("kv/versions", b"1")
    v2 = client.put("kv/versions", b"2")
    assert v2 > v1
    got = client.get("kv/versions")
    assert got.version == v2 and bytes(got) == b"2"


def test_exists_and_remove(client):
    client.put("kv/removable", b"x")
    assert client.exists("kv/removable")
    assert client.remove("kv/removable") is True
    assert not client.exists("kv/removable")
    assert client.remove("kv/removable") is False
    assert client.get("kv/removable") is None


def test_list_pages_through_every_key_with_a_prefix(client):
    keys = [f"list/{i:04d}" for i in range(1200)]
    assert len(client.put_many({k: b"v" for k in keys})) == 1200
    assert client.list("list/") == keys
    assert client.count("list/") == 1200
    assert client.list("list/", limit=5) == keys[:5]
    assert client.list("list/", start_after="list/1195") == keys[1196:]
    assert client.list("list/none-") == []


def test_conditional_puts_and_removes(client):
    v = client.put("kv/cond", b"a", if_absent=True)
    with pytest.raises(sluice.Conflict):
        client.put("kv/cond", b"b", if_absent=True)
    with pytest.raises(sluice.Conflict):
        client.put("kv/cond", b"b", if_version=v + 1000)
    v2 = client.put("kv/cond", b"c", if_version=v)
    assert bytes(client.get("kv/cond")) == b"c"
    with pytest.raises(sluice.Conflict):
        client.remove("kv/cond", if_version=v)
    assert client.remove("kv/cond", if_version=v2)


def test_a_value_with_a_ttl_expires(client):
    client.put("kv/ttl", b"short-lived", ttl=0.3)
    assert client.get("kv/ttl") is not None
    deadline = time.monotonic() + 10
    while client.get("kv/ttl") is not None:
        assert time.monotonic() < deadline, "the value outlived its ttl by 10 s"
        time.sleep(0.05)


def test_put_many_and_get_many_keep_order_and_report_each_item(client):
    versions = client.put_many([("many/a", b"1"), ("many/b", b"22"), ("many/c", {"n": 3})])
    assert len(versions) == 3 and all(v > 0 for v in versions)
    got = client.get_many(["many/a", "many/missing", "many/b", "many/c"])
    assert bytes(got[0]) == b"1" and got[1] is None and bytes(got[2]) == b"22" and got[3] == {"n": 3}
    out = client.put_many([("many/ok", b"x"), ("", b"bad key")], return_exceptions=True)
    assert out[0] > 0 and isinstance(out[1], sluice.InvalidArgument)
    with pytest.raises(sluice.InvalidArgument):
        client.put_many([("many/ok2", b"x"), ("", b"bad key")])


def test_get_into_copies_into_a_writable_buffer(client):
    client.put("kv/into", b"0123456789")
    out = bytearray(16)
    assert client.get_into("kv/into", out) == 10
    assert out[:10] == b"0123456789"
    with pytest.raises(sluice.InvalidArgument, match="needs a writable"):
        client.get_into("kv/into", b"read-only bytes")
    with pytest.raises(sluice.InvalidArgument):
        client.get_into("kv/into", bytearray(4))
    with pytest.raises(sluice.NotFound):
        client.get_into("kv/never-put", bytearray(4))


def test_a_header_and_body_list_is_stored_as_one_value(client):
    header = b"HDR:" + (7).to_bytes(4, "little")
    body = bytes(range(256)) * 1000
    client.put("kv/gathered", [header, memoryview(body)])
    assert bytes(client.get("kv/gathered")) == header + body


def test_reserve_writes_a_value_in_place(client):
    r = client.reserve("kv/reserved", 4096)
    assert len(r) == 4096
    m = memoryview(r)
    assert not m.readonly
    m[:5] = b"hello"
    m[5:] = b"." * 4091
    v = r.commit()
    got = client.get("kv/reserved")
    assert got.version == v and bytes(got) == b"hello" + b"." * 4091
    with pytest.raises(sluice.InvalidArgument, match="already committed"):
        r.commit()
    with client.reserve("kv/reserved-with", 3) as r2:
        memoryview(r2)[:] = b"abc"
    assert bytes(client.get("kv/reserved-with")) == b"abc"
    with pytest.raises(RuntimeError):
        with client.reserve("kv/reserved-aborted", 3) as r3:
            memoryview(r3)[:] = b"xyz"
            raise RuntimeError("the writer failed")
    assert client.get("kv/reserved-aborted") is None


def test_a_closed_client_and_its_views_raise_client_closed(owner):
    c = sluice.connect(owner.address)
    c.put("kv/closing", b"still here")
    v = c.get("kv/closing")
    c.close()
    assert c.closed
    with pytest.raises(sluice.ClientClosed):
        c.get("kv/closing")
    with pytest.raises(sluice.ClientClosed):
        bytes(v)
    with pytest.raises(sluice.ClientClosed):
        memoryview(v)
    with pytest.raises(sluice.Unavailable):  # ClientClosed is an Unavailable
        v.__dlpack__()


def test_connecting_where_nothing_listens_raises_unavailable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(sluice.Unavailable):
        sluice.connect(f"127.0.0.1:{port}", connect_timeout=0.5)
    assert time.monotonic() - start < 10


def test_bad_arguments_raise_invalid_argument(client):
    with pytest.raises(sluice.InvalidArgument):
        client.put("", b"x")
    with pytest.raises(sluice.InvalidArgument, match="cannot store a object"):
        client.put("kv/bad", object())
    with pytest.raises(sluice.InvalidArgument, match="timeout"):
        client.get("kv/bad", timeout=-1)
    with pytest.raises(sluice.InvalidArgument, match="replicas"):
        client.put("kv/bad", b"x", replicas=0)
    with pytest.raises(sluice.InvalidArgument, match="transport"):
        sluice.connect(client.address, transport="carrier-pigeon")
    with pytest.raises(sluice.InvalidArgument, match="size in bytes or a"):
        client.reserve("kv/bad", "big")
    # Every error is a sluice.Error with its code, and the familiar
    # Python base where there is one.
    with pytest.raises(ValueError):
        client.put("", b"x")
    try:
        client.put("", b"x")
    except sluice.Error as e:
        assert e.code == "invalid_argument" and "key" in str(e)


def test_a_value_over_the_size_limit_is_refused_and_nothing_is_stored(client):
    import numpy as np

    too_big = np.zeros(300 << 20, dtype=np.uint8)  # the default max_value is 256 MiB
    with pytest.raises(sluice.InvalidArgument, match="256"):
        client.put("kv/too-big", too_big)
    with pytest.raises(sluice.InvalidArgument):
        client.put("kv/too-big", memoryview(too_big))
    assert client.get("kv/too-big") is None


def test_the_gil_is_released_while_a_call_waits(make_owner):
    import threading

    o = make_owner()
    c = sluice.connect(o.address)
    c.put("gil/k", b"v")
    counted = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counted[0] += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        # The counter's pace with the main thread asleep (GIL released).
        before = counted[0]
        time.sleep(0.2)
        alone = (counted[0] - before) / 0.2
        o.pause()  # the owner stops answering: the next call waits for its deadline
        before = counted[0]
        start = time.monotonic()
        with pytest.raises(sluice.Timeout):
            c.get("gil/k", timeout=1.0)
        waited = time.monotonic() - start
        during = counted[0] - before
    finally:
        stop.set()
        t.join()
        o.resume()
    assert waited >= 0.9
    # Holding the GIL through the wait would have left the counter a 5 ms
    # switch interval at most; released, it runs at about its own pace.
    assert during > 0.2 * alone * waited, (during, alone)
    c.close()


def test_status_reports_members_and_repair(client):
    s = client.status()
    assert s["object_count"] >= 0
    assert any(m["up"] and m["role"] == "owner" for m in s["members"])
    repair = s["repair"]
    assert set(repair) == {"under_replicated", "without_live_copy", "copies_in_flight", "copies_made",
                           "bytes_copied", "copies_failed"}
    # One owner, nothing ever lost: nothing to repair.
    assert all(isinstance(v, int) for v in repair.values())
    assert repair["under_replicated"] == 0 and repair["copies_made"] == 0


def test_min_replicas_accepts_fewer_copies_and_says_how_many(client):
    # One owner: two copies cannot be had, and nothing is stored.
    with pytest.raises(sluice.Unavailable):
        client.put("copies/strict", b"v", replicas=2)
    assert client.get("copies/strict") is None
    version, copies = client.put_with_copies("copies/relaxed", b"v2", replicas=2, min_replicas=1)
    assert copies == 1 and version > 0
    assert bytes(client.get("copies/relaxed")) == b"v2"
    assert client.put("copies/plain", b"v3", replicas=2, min_replicas=1) > version
    big = bytes(range(256)) * 4096  # 1 MiB: written through a reservation
    _, copies = client.put_with_copies("copies/big", big, replicas=2, min_replicas=1)
    assert copies == 1
    with pytest.raises(sluice.InvalidArgument):
        client.put("copies/bad", b"x", replicas=2, min_replicas=3)
