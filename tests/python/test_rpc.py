"""RPC through the Python module: serving plain and async handlers,
calling, streams, errors, and a large tensor argument read in place."""

import asyncio
import threading
import time

import numpy as np
import pytest

import sluice
from conftest import in_pool


def wait_served(c, name, seconds=10):
    """Calls to a name just served may race its registration: retry NotFound."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return c.call(None, name, {"probe": True})
        except sluice.NotFound:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


@pytest.fixture
def pair(owner):
    with sluice.connect(owner.address, name="server") as server, sluice.connect(owner.address, name="caller") as caller:
        yield server, caller


def test_a_plain_handler_answers_a_call(pair):
    server, caller = pair

    def add(args):
        if args.get("probe"):
            return {}
        return {"sum": args["a"] + args["b"], "who": "server"}

    server.serve("py.add", add)
    wait_served(caller, "py.add")
    assert caller.call(None, "py.add", {"a": 2, "b": 40}) == {"sum": 42, "who": "server"}
    assert caller.call(server.rpc_id, "py.add", {"a": 1, "b": 1})["sum"] == 2

    def who(args, request):
        return {"caller": request.caller, "left": request.time_left, "method": request.method}

    server.serve("py.who", who)
    wait_served(caller, "py.who")
    out = caller.call(None, "py.who", {}, timeout=3.0)
    assert out["caller"] == caller.rpc_id and out["method"] == "py.who" and 0 < out["left"] <= 3.0


def test_handler_errors_reach_the_caller_typed(pair):
    server, caller = pair

    def picky(args):
        if args.get("probe"):
            return {}
        if args["what"] == "missing":
            raise sluice.NotFound("no such thing")
        if args["what"] == "bad":
            raise ValueError("that is not a number")
        return "not a dict"

    server.serve("py.picky", picky)
    wait_served(caller, "py.picky")
    with pytest.raises(sluice.NotFound, match="no such thing"):
        caller.call(None, "py.picky", {"what": "missing"})
    with pytest.raises(sluice.HandlerFailed, match="ValueError: that is not a number"):
        caller.call(None, "py.picky", {"what": "bad"})
    with pytest.raises(sluice.HandlerFailed, match="result cannot be sent: invalid_argument: a handler.s result is a dict"):
        caller.call(None, "py.picky", {"what": "other"})
    with pytest.raises(sluice.NotFound):
        caller.call(None, "py.nobody-serves-this", {})
    with pytest.raises(sluice.InvalidArgument, match="arguments is a dict"):
        caller.call(None, "py.picky", [1, 2])


def test_a_64_mib_tensor_argument_reaches_the_handler_in_the_pool(pair):
    server, caller = pair
    seen = {}

    def checksum(args):
        if args.get("probe"):
            return {}
        t = args["t"]
        seen["in_pool"] = in_pool(t.data_ptr, t.nbytes)
        a = np.from_dlpack(t)
        seen["ptr"] = a.ctypes.data == t.data_ptr
        return {"sum": int(a.sum(dtype=np.int64)), "echo": t}

    server.serve("py.checksum", checksum)
    wait_served(caller, "py.checksum")
    t = np.arange(16 << 20, dtype=np.int32)  # 64 MiB
    out = caller.call(None, "py.checksum", {"t": t}, timeout=60)
    assert out["sum"] == int(t.sum(dtype=np.int64))
    assert seen == {"in_pool": True, "ptr": True}
    # The result's tensor comes back in the pool too.
    assert in_pool(out["echo"].data_ptr, out["echo"].nbytes)
    assert np.array_equal(np.from_dlpack(out["echo"]), t)


def test_max_concurrent_answers_overloaded_beyond_it(pair):
    server, caller = pair
    release = threading.Event()
    entered = threading.Semaphore(0)

    def slow(args):
        if not args.get("probe"):
            entered.release()
            release.wait(10)
        return {}

    server.serve("py.slow", slow, max_concurrent=2, workers=2)
    wait_served(caller, "py.slow")
    results = []

    def call():
        try:
            caller.call(None, "py.slow", {}, timeout=10)
            results.append("ok")
        except sluice.Overloaded:
            results.append("overloaded")

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        # Both calls are in the handler: a third is one too many.
        assert entered.acquire(timeout=10) and entered.acquire(timeout=10)
        with pytest.raises(sluice.Overloaded):
            caller.call(None, "py.slow", {}, timeout=10)
    finally:
        release.set()
        for t in threads:
            t.join()
    assert results == ["ok", "ok"]


def test_streams_from_a_generator_in_order_with_backpressure(pair):
    server, caller = pair
    produced = []

    def count(args):
        for i in range(args["n"]):
            produced.append(i)
            yield {"i": i, "payload": np.full(1024, i, dtype=np.int16)}

    server.serve_stream("py.count", count)
    time.sleep(0.2)
    with caller.call_stream(None, "py.count", {"n": 50}, window=4) as s:
        first = next(s)
        assert first["i"] == 0
        time.sleep(0.3)
        # The handler ran at most a window (and what is on its way) ahead.
        assert len(produced) <= 1 + 4 + 1
        rest = [item["i"] for item in s]
    assert rest == list(range(1, 50))
    assert all(np.asarray(first["payload"]) == 0)


def test_a_stream_handler_that_raises_ends_the_stream_with_its_error(pair):
    server, caller = pair

    def broken(args):
        yield {"i": 0}
        raise sluice.Conflict("changed under me")

    server.serve_stream("py.broken", broken)
    time.sleep(0.2)
    s = caller.call_stream(None, "py.broken", {})
    assert next(s) == {"i": 0}
    with pytest.raises(sluice.Conflict, match="changed under me"):
        next(s)


def test_async_handlers_calls_and_streams_on_an_event_loop(owner):
    async def main():
        server = sluice.connect(owner.address, name="async-server")
        caller = sluice.connect(owner.address, name="async-caller")
        loop_thread = threading.get_ident()
        ran_on = []

        async def double(args):
            ran_on.append(threading.get_ident())
            await asyncio.sleep(0.01)
            return {"x": args.get("x", 0) * 2}

        async def letters(args):
            for ch in args["text"]:
                await asyncio.sleep(0)
                yield {"ch": ch}

        server.serve("py.double", double)
        server.serve_stream("py.letters", letters)
        deadline = time.monotonic() + 10
        while True:
            try:
                await caller.acall(None, "py.double", {"x": 1})
                break
            except sluice.NotFound:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
        # Many calls in flight at once, on one thread.
        results = await asyncio.gather(*(caller.acall(None, "py.double", {"x": i}) for i in range(50)))
        assert [r["x"] for r in results] == [2 * i for i in range(50)]
        assert set(ran_on) == {loop_thread}
        got = [item["ch"] async for item in caller.call_stream(None, "py.letters", {"text": "sluice"})]
        assert "".join(got) == "sluice"
        with pytest.raises(sluice.NotFound):
            await caller.acall(None, "py.nobody", {})
        # aput / aget
        v = await caller.aput("async/k", b"async bytes")
        got = await caller.aget("async/k")
        assert got.version == v and bytes(got) == b"async bytes"
        assert await caller.aget("async/missing") is None
        await caller.aput("async/d", {"t": np.arange(3)})
        assert np.array_equal(np.asarray((await caller.aget("async/d"))["t"]), np.arange(3))
        server.close()
        caller.close()

    asyncio.run(main())


def test_a_handler_that_calls_back_into_sluice_does_not_deadlock(pair):
    server, caller = pair

    def relay(args):
        if args.get("probe"):
            return {}
        server.put("rpc/from-handler", b"written by the handler")
        inner = server.call(None, "py.inner", {"v": args["v"]}, timeout=10)
        return {"v": inner["v"] + 1}

    def inner(args):
        return {"v": args.get("v", 0) * 10}

    server.serve("py.inner", inner)
    server.serve("py.relay", relay)
    wait_served(caller, "py.inner")
    wait_served(caller, "py.relay")
    assert caller.call(None, "py.relay", {"v": 4}, timeout=20) == {"v": 41}
    assert bytes(caller.get("rpc/from-handler")) == b"written by the handler"


def test_unserve_and_bad_names(pair):
    server, caller = pair
    server.serve("py.gone", lambda args: {})
    wait_served(caller, "py.gone")
    server.unserve("py.gone")
    deadline = time.monotonic() + 10
    while True:
        try:
            caller.call(None, "py.gone", {})
        except sluice.NotFound:
            break
        assert time.monotonic() < deadline
        time.sleep(0.02)
    with pytest.raises(sluice.NotFound):
        server.unserve("py.gone")
    with pytest.raises(sluice.InvalidArgument):
        server.serve("", lambda args: {})
    with pytest.raises(sluice.InvalidArgument, match="routing"):
        caller.call(None, "py.gone", {}, routing="random")


def test_a_stream_item_slower_than_the_readers_wait_slice_still_arrives(pair):
    server, caller = pair

    def slow(args):
        for i in range(3):
            time.sleep(0.25)  # longer than the reader's 100 ms slices
            yield {"i": i}

    server.serve_stream("py.slow-items", slow)
    time.sleep(0.2)
    assert [item["i"] for item in caller.call_stream(None, "py.slow-items", {}, timeout=10)] == [0, 1, 2]


def test_every_error_class_a_handler_raises_reaches_the_caller_as_itself(pair):
    server, caller = pair
    classes = {cls.code: cls for cls in sluice._errors.by_code.values()}

    def fail_as(args):
        if args.get("probe"):
            return {}
        raise classes[args["code"]]("raised by the handler as " + args["code"])

    server.serve("py.fail-as", fail_as)
    wait_served(caller, "py.fail-as")
    assert len(classes) == 13
    for code, cls in classes.items():
        with pytest.raises(cls, match="raised by the handler as " + code) as caught:
            caller.call(None, "py.fail-as", {"code": code})
        assert type(caught.value) is cls and caught.value.code == code and isinstance(caught.value, sluice.Error)


def test_a_full_owner_answers_no_capacity(make_owner):
    o = make_owner('[owner]\ncapacity = "4MiB"\nmax_value = "2MiB"\neviction = "none"\n')
    with sluice.connect(o.address) as c:
        with pytest.raises(sluice.NoCapacity):
            for i in range(8):
                c.put(f"full/{i}", np.zeros(1 << 20, dtype=np.uint8))
