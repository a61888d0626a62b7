"""s3fs (FUSE) mounts a bucket of a gateway that checks signatures, and
ls, cat, cp, mv and rm work through the mount as on any directory, their
effects landing in the backing directory.

Skipped, with the reason, where s3fs is not installed or this machine
does not allow FUSE mounts."""

import os
import shutil
import subprocess
import time

import pytest

from conftest import Gateway, end_process

KEY, SECRET = "AKIDS3FS", "s3fs-secret"

pytestmark = pytest.mark.skipif(shutil.which("s3fs") is None,
                                reason="s3fs is not installed (scripts/bootstrap.sh installs it)")


class Mount:
    def __init__(self, tmp_path, gateway):
        self.point = os.path.join(tmp_path, "mnt")
        os.makedirs(self.point)
        passwd = os.path.join(tmp_path, "passwd")
        with open(passwd, "w") as f:
            f.write(f"{KEY}:{SECRET}\n")
        os.chmod(passwd, 0o600)
        self.proc = subprocess.Popen(
            ["s3fs", "data", self.point, "-f", "-o", f"url={gateway.endpoint}", "-o", "use_path_request_style",
             "-o", f"passwd_file={passwd}", "-o", "endpoint=us-east-1", "-o", "sigv4", "-o", "dbglevel=warn",
             "-o", "stat_cache_expire=1"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 15
        while not os.path.ismount(self.point):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                out = self.stop()
                if "fuse" in out.lower() or "permission" in out.lower() or not os.access("/dev/fuse", os.R_OK):
                    pytest.skip("this machine does not allow a FUSE mount: " + out.strip()[-300:])
                raise RuntimeError("s3fs did not mount: " + out)
            time.sleep(0.1)

    def stop(self):
        if os.path.ismount(self.point):
            subprocess.run(["fusermount", "-u", self.point], capture_output=True, timeout=30)
        end_process(self.proc)
        out = self.proc.stdout.read()
        self.proc.stdout.close()
        return out


def run(*args):
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{args}: {done.stderr}"
    return done.stdout


def test_ls_cat_cp_mv_rm_through_an_s3fs_mount(tmp_path):
    gateway = Gateway(str(tmp_path), access=(KEY, SECRET))
    data = gateway.data_dir
    with open(os.path.join(data, "hello.txt"), "w") as f:
        f.write("hello from the directory\n")
    os.makedirs(os.path.join(data, "sub"))
    with open(os.path.join(data, "sub", "deep.txt"), "w") as f:
        f.write("deeper\n")
    mount = Mount(str(tmp_path), gateway)
    try:
        mnt = mount.point
        assert sorted(run("ls", mnt).split()) == ["hello.txt", "sub"]
        assert run("ls", os.path.join(mnt, "sub")).split() == ["deep.txt"]
        assert run("cat", os.path.join(mnt, "hello.txt")) == "hello from the directory\n"
        assert run("cat", os.path.join(mnt, "sub", "deep.txt")) == "deeper\n"

        source = os.path.join(tmp_path, "local.bin")
        payload = os.urandom(3 * 1024 * 1024 + 7)
        with open(source, "wb") as f:
            f.write(payload)
        run("cp", source, os.path.join(mnt, "copied.bin"))
        with open(os.path.join(data, "copied.bin"), "rb") as f:
            assert f.read() == payload
        run("cp", os.path.join(mnt, "copied.bin"), os.path.join(tmp_path, "back.bin"))
        with open(os.path.join(tmp_path, "back.bin"), "rb") as f:
            assert f.read() == payload

        run("mv", os.path.join(mnt, "copied.bin"), os.path.join(mnt, "sub", "moved.bin"))
        assert not os.path.exists(os.path.join(data, "copied.bin"))
        with open(os.path.join(data, "sub", "moved.bin"), "rb") as f:
            assert f.read() == payload

        run("rm", os.path.join(mnt, "sub", "moved.bin"))
        assert not os.path.exists(os.path.join(data, "sub", "moved.bin"))
        assert sorted(run("ls", mnt).split()) == ["hello.txt", "sub"]

        # mkdir puts a directory marker ("made/"): a directory in the backing
        # directory, listed while empty, kept when its last file goes.
        run("mkdir", os.path.join(mnt, "made"))
        assert os.path.isdir(os.path.join(data, "made"))
        assert sorted(run("ls", mnt).split()) == ["hello.txt", "made", "sub"]
        run("cp", os.path.join(data, "hello.txt"), os.path.join(mnt, "made", "in.txt"))
        assert run("cat", os.path.join(data, "made", "in.txt")) == "hello from the directory\n"
        run("rm", os.path.join(mnt, "made", "in.txt"))
        assert os.path.isdir(os.path.join(data, "made"))
        assert run("ls", os.path.join(mnt, "made")).split() == []
        run("rmdir", os.path.join(mnt, "made"))
        assert not os.path.exists(os.path.join(data, "made"))
        assert sorted(run("ls", mnt).split()) == ["hello.txt", "sub"]
    finally:
        out = mount.stop()
        assert gateway.alive(), "the gateway exited during the test: " + out
        gateway.stop()
