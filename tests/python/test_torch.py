"""PyTorch tensors through DLPack, both ways."""

import numpy as np
import pytest

import sluice

torch = pytest.importorskip("torch")

TORCH_DTYPES = [
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
]


@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=str)
def test_every_torch_dtype_round_trips_through_dlpack(client, dtype):
    t = (torch.arange(24) % 13).to(dtype).reshape(2, 3, 4)
    key = "torch/" + str(dtype)
    client.put(key, t)
    v = client.get(key)
    assert v.shape == (2, 3, 4)
    back = torch.from_dlpack(v)
    assert back.dtype == dtype and back.shape == t.shape and torch.equal(back, t)
    assert back.data_ptr() == v.data_ptr  # aliases the value, no copy


def test_a_bool_tensor_is_stored_through_numpy(client):
    # torch of this vintage exports no bool through DLPack; its numpy view has a buffer.
    t = torch.tensor([True, False, True])
    client.put("torch/bool", t)
    v = client.get("torch/bool")
    assert v.dtype == "bool"
    assert torch.equal(torch.from_numpy(np.asarray(v).copy()), t)


def test_a_tensor_in_a_dict_and_a_reserved_tensor_written_by_torch(client):
    kv = torch.randn(8, 16, dtype=torch.float32)
    client.put("torch/dict", {"layer": 3, "k": kv, "v": kv * 2})
    got = client.get("torch/dict")
    assert got["layer"] == 3
    assert torch.equal(torch.from_dlpack(got["k"]), kv) and torch.equal(torch.from_dlpack(got["v"]), kv * 2)
    r = client.reserve("torch/reserved", ((8, 16), torch.bfloat16))
    w = torch.from_dlpack(r)
    assert w.dtype == torch.bfloat16 and w.data_ptr() == r.data_ptr
    w.copy_(kv.to(torch.bfloat16))
    r.commit()
    assert torch.equal(torch.from_dlpack(client.get("torch/reserved")), kv.to(torch.bfloat16))


def test_a_non_contiguous_tensor_is_refused(client):
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    with pytest.raises(sluice.InvalidArgument, match="contiguous"):
        client.put("torch/transposed", t)
    client.put("torch/transposed", t.contiguous())
    assert torch.equal(torch.from_dlpack(client.get("torch/transposed")), t)
