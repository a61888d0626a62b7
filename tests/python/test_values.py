"""Values through the Python module: numpy arrays of every dtype, dicts,
gathered buffers, and the errors for what cannot be stored."""

import numpy as np
import pytest

import sluice

NUMPY_DTYPES = [
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
]


def sample(dtype, shape=(3, 5)):
    n = int(np.prod(shape))
    if dtype == np.bool_:
        return (np.arange(n) % 3 == 0).reshape(shape)
    if np.issubdtype(dtype, np.complexfloating):
        return (np.arange(n) + 1j * np.arange(n, 0, -1)).astype(dtype).reshape(shape)
    return (np.arange(n) * 7 % 251).astype(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_numpy_dtype_round_trips(client, dtype):
    a = sample(dtype)
    key = "values/np/" + np.dtype(dtype).name
    client.put(key, a)
    v = client.get(key)
    assert v.is_tensor and v.shape == (3, 5) and v.dtype == np.dtype(dtype).name
    # Through the buffer protocol (every dtype numpy has a format for).
    b = np.asarray(v)
    assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b)
    assert not b.flags.writeable
    # Through DLPack, for the dtypes numpy takes that way (not bool).
    if dtype != np.bool_:
        c = np.from_dlpack(v)
        assert c.dtype == a.dtype and np.array_equal(a, c)
        assert c.ctypes.data == v.data_ptr  # the same bytes, no copy


def test_zero_dimensional_and_empty_arrays_round_trip(client):
    client.put("values/scalar", np.array(3.5, dtype=np.float64))
    v = client.get("values/scalar")
    assert v.shape == () and np.from_dlpack(v) == 3.5
    client.put("values/empty", np.zeros((4, 0), dtype=np.int32))
    e = client.get("values/empty")
    assert e.shape == (4, 0) and np.from_dlpack(e).shape == (4, 0)


def test_read_only_and_fortran_ordered_arrays(client):
    ro = np.frombuffer(b"\x01\x00\x02\x00", dtype=np.uint16)  # numpy will not export it through DLPack
    client.put("values/read-only", ro)
    assert np.array_equal(np.asarray(client.get("values/read-only")), [1, 2])
    f = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(sluice.InvalidArgument, match="contiguous"):
        client.put("values/fortran", f)
    with pytest.raises(sluice.InvalidArgument, match="contiguous"):
        client.put("values/strided", np.arange(10)[::2])
    assert client.get("values/fortran") is None


def test_a_dict_of_every_field_kind_round_trips(client):
    header = b"\x00HDR"
    body = bytes(range(200))
    value = {
        "step": 1200,
        "negative": -(2**63),
        "loss": 0.125,
        "done": True,
        "model": "llama-7b",
        "raw": b"\xff\x00raw",
        "message": [header, body],
        "logits": np.arange(32, dtype=np.float32).reshape(4, 8),
        "ids": np.array([1, 2, 3], dtype=np.int64),
    }
    client.put("values/dict", value)
    got = client.get("values/dict")
    assert isinstance(got, dict) and list(got) == list(value)
    assert got["step"] == 1200 and got["negative"] == -(2**63)
    assert got["loss"] == 0.125 and got["done"] is True and got["model"] == "llama-7b"
    assert isinstance(got["raw"], sluice.View) and bytes(got["raw"]) == b"\xff\x00raw"
    assert bytes(got["message"]) == header + body
    assert np.array_equal(np.from_dlpack(got["logits"]), value["logits"])
    assert np.array_equal(np.asarray(got["ids"]), value["ids"])
    # raw=True: the value's own bytes, a dict encoding
    whole = client.get("values/dict", raw=True)
    assert not whole.is_tensor and bytes(whole)[:4] == b"SLDT"


def test_a_view_is_stored_again_as_what_it_shows(client):
    client.put("values/source", {"t": np.arange(4, dtype=np.int16), "b": b"bytes"})
    got = client.get("values/source")
    client.put("values/copy-of-tensor", got["t"])
    client.put("values/copy-of-bytes", got["b"])
    assert np.array_equal(np.asarray(client.get("values/copy-of-tensor")), np.arange(4, dtype=np.int16))
    assert bytes(client.get("values/copy-of-bytes")) == b"bytes"


def test_what_a_dict_cannot_hold_is_refused_with_the_field_named(client):
    with pytest.raises(sluice.InvalidArgument, match="reserved"):
        client.put("values/bad", {"__mine": 1})
    with pytest.raises(sluice.InvalidArgument, match="'big'.*64 bits"):
        client.put("values/bad", {"big": 2**64})
    with pytest.raises(sluice.InvalidArgument, match="'n'.*cannot store a NoneType"):
        client.put("values/bad", {"n": None})
    with pytest.raises(sluice.InvalidArgument, match="must be str"):
        client.put("values/bad", {1: b"x"})
    with pytest.raises(sluice.InvalidArgument, match="'f'.*contiguous"):
        client.put("values/bad", {"f": np.arange(10)[::3]})
    with pytest.raises(sluice.InvalidArgument, match="dtype|format"):
        client.put("values/bad", np.array(["a", "b"]))
    assert client.get("values/bad") is None


def test_a_dlpack_capsule_is_taken_once(client):
    a = np.arange(5, dtype=np.float64)
    capsule = a.__dlpack__()
    client.put("values/capsule", capsule)
    assert np.array_equal(np.from_dlpack(client.get("values/capsule")), a)
    with pytest.raises(sluice.InvalidArgument, match="already consumed"):
        client.put("values/capsule-again", capsule)


def test_reserve_a_tensor_and_write_it_in_place(client):
    r = client.reserve("values/reserved", ((64, 32), np.float32))
    assert r.shape == (64, 32) and r.dtype == "float32" and r.nbytes == 64 * 32 * 4
    a = np.asarray(r)  # writable: the pool memory itself
    assert a.flags.writeable and a.ctypes.data == r.data_ptr
    a[:] = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    r.commit()
    v = client.get("values/reserved")
    assert np.array_equal(np.from_dlpack(v), np.arange(64 * 32, dtype=np.float32).reshape(64, 32))
    # Committed where it was written: the value is the reserved memory.
    assert v.data_ptr == r.data_ptr
    with pytest.raises(sluice.InvalidArgument, match="dtype"):
        client.reserve("values/reserved", ((2,), "float128"))
