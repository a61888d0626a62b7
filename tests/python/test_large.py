"""A tensor over 4 GiB, end to end: no 32-bit size anywhere on its way."""

import numpy as np
import pytest

import sluice


def mem_available_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def test_a_tensor_over_4_gib_round_trips(make_owner):
    elements = (4 << 30) // 8 + (1 << 20)  # 4 GiB + 8 MiB of float64
    nbytes = elements * 8
    # The source array and the pool's copy, with room to spare.
    if mem_available_bytes() < 2 * nbytes + (3 << 30):
        pytest.skip("needs about 12 GiB of free memory")
    o = make_owner('[owner]\ncapacity = "5GiB"\nsegment = "5GiB"\nmax_value = "5GiB"\n[wire]\nmax_payload = "5GiB"\n')
    with sluice.connect(o.address, timeout=120) as c:
        a = np.arange(elements, dtype=np.float64)
        version = c.put("large/t", a)
        v = c.get("large/t")
        assert v.version == version and v.nbytes == nbytes and v.shape == (elements,)
        b = np.from_dlpack(v)
        # Every element, compared in slices so no second 4 GiB array is made.
        step = 1 << 27
        for start in range(0, elements, step):
            assert np.array_equal(a[start : start + step], b[start : start + step]), start
        del a
