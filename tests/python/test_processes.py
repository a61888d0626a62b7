"""Two Python processes on one host: a value put by one is read by the
other in place, from the owner's pool."""

import os
import subprocess
import sys

import numpy as np

from conftest import in_pool


def run_python(code, address):
    env = dict(os.environ, SLUICE_ADDRESS=address)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_tensor_put_in_one_process_is_read_in_place_in_another(client, owner):
    run_python(
        """
import numpy as np, sluice
with sluice.connect() as c:
    r = c.reserve("proc/blocks", ((16, 1024, 1024), np.float32))   # 64 MiB, written in place
    a = np.asarray(r)
    for i in range(16):
        a[i] = i
    r.commit()
""",
        owner.address,
    )
    v = client.get("proc/blocks")
    assert v.shape == (16, 1024, 1024) and v.dtype == "float32"
    assert in_pool(v.data_ptr, v.nbytes)
    a = np.from_dlpack(v)
    assert all((a[i] == i).all() for i in range(16))


def test_a_dict_put_here_is_read_there(client, owner):
    client.put("proc/dict", {"step": 9, "ids": np.arange(1000, dtype=np.int64), "note": "from the parent"})
    out = run_python(
        """
import numpy as np, sluice
with sluice.connect() as c:
    d = c.get("proc/dict")
    ids = np.from_dlpack(d["ids"])
    assert (ids == np.arange(1000)).all()
    print(d["step"], d["note"], int(ids.sum()))
""",
        owner.address,
    )
    assert out.split() == ["9", "from", "the", "parent", str(sum(range(1000)))]
