"""Zero copy and lifetimes: what a get returns aliases the owner's pool,
and the value (with its read lease) lives exactly as long as the view or
any array made from it."""

import gc
import time

import numpy as np
import pytest

import sluice
from conftest import in_pool


@pytest.mark.parametrize("nbytes", [4096, 64 << 20], ids=["4KiB", "64MiB"])
def test_a_get_view_aliases_the_owners_pool(client, nbytes):
    a = np.random.default_rng(nbytes).integers(0, 255, nbytes, dtype=np.uint8)
    client.put("life/pool", a)
    v = client.get("life/pool")
    assert in_pool(v.data_ptr, v.nbytes), "the view's bytes are not in a pool segment this process mapped"
    b = np.from_dlpack(v)
    assert b.ctypes.data == v.data_ptr and np.array_equal(a, b)
    raw = client.get("life/pool", raw=True)
    assert in_pool(raw.data_ptr, raw.nbytes)
    assert np.asarray(memoryview(raw)).ctypes.data == raw.data_ptr


def test_an_array_keeps_its_version_after_the_key_changes(client):
    client.put("life/changing", np.full(1 << 20, 1, dtype=np.int32))
    a = np.from_dlpack(client.get("life/changing"))  # the view itself is gone at once
    gc.collect()
    client.put("life/changing", np.full(1 << 20, 2, dtype=np.int32))
    client.remove("life/changing")
    for _ in range(3):
        client.put("life/other", np.full(1 << 20, 3, dtype=np.int32))
    assert (a == 1).all()


def stored_bytes(client):
    return sum(m["stored_bytes"] for m in client.status()["members"])


def wait_for(condition, what, seconds=15):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_the_read_lease_goes_with_the_last_array_made_from_a_view(make_owner):
    o = make_owner()
    c = sluice.connect(o.address)
    size = 32 << 20
    c.put("life/leased", np.ones(size, dtype=np.uint8))
    v = c.get("life/leased")
    t = np.from_dlpack(v)
    m = memoryview(v)
    c.remove("life/leased")
    # Removed, but read: the owner keeps the bytes for the lease.
    wait_for(lambda: stored_bytes(c) >= size, "the owner reported the leased value")
    time.sleep(1.5)
    assert stored_bytes(c) >= size, "the value was dropped while views of it lived"
    del v
    gc.collect()
    time.sleep(1.5)
    assert stored_bytes(c) >= size, "the value was dropped while an array and a memoryview of it lived"
    assert (t == 1).all()
    del t
    m.release()
    del m
    gc.collect()
    wait_for(lambda: stored_bytes(c) < size, "the owner still holds the value after its last array went")
    c.close()


def test_a_view_outlives_its_client_object_but_not_its_close(owner):
    c = sluice.connect(owner.address)
    c.put("life/after-close", np.arange(10, dtype=np.int64))
    v = c.get("life/after-close")
    a = np.from_dlpack(v)
    c.close()
    with pytest.raises(sluice.ClientClosed):
        np.from_dlpack(v)
    # What was made before the close stays valid until it goes.
    assert np.array_equal(a, np.arange(10))
    del c
    gc.collect()
    assert np.array_equal(a, np.arange(10))
