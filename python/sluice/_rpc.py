"""RPC and asyncio for sluice.Client, on the extension's primitives.

A served plain function runs on a thread pool of its own (bounded by
``workers``; the calls waiting for a worker are bounded by
``max_concurrent``, beyond which callers get Overloaded); an ``async def``
runs on the event loop that was running when it was served. Sluice's own
threads only hand calls over: no user code runs on them.
"""

import asyncio
import concurrent.futures
import inspect
import threading

from sluice._errors import Error, HandlerFailed, Timeout
from sluice._sluice import Client

_pools_lock = threading.Lock()


def _running_loop_or_none():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _takes_request(fn):
    """Whether fn takes (args, request) rather than (args)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def _bind(fn):
    """fn as a function of the request."""
    if _takes_request(fn):
        return lambda request: fn(request.args, request)
    return lambda request: fn(request.args)


def _answer(promise, result):
    try:
        promise.reply(result)
    except Exception as exc:  # noqa: BLE001 - a result that cannot be sent is the handler's failure
        promise.reply_error(HandlerFailed("its result cannot be sent: " + str(exc)))


def _reply(promise, fn, request):
    try:
        result = fn(request)
    except BaseException as exc:  # noqa: B902 - every failure answers the caller
        promise.reply_error(exc)
        if not isinstance(exc, Exception):
            raise
        return
    _answer(promise, result)


async def _reply_async(promise, fn, request):
    try:
        result = await fn(request)
    except BaseException as exc:  # noqa: B902
        promise.reply_error(exc)
        if not isinstance(exc, Exception):
            raise
        return
    _answer(promise, result)


def _write_all(writer, gen_fn, request):
    try:
        for item in gen_fn(request):
            if writer.cancelled:
                break
            writer.write(item)
    except BaseException as exc:  # noqa: B902
        writer.fail(exc)
        if not isinstance(exc, Exception):
            raise
        return
    writer.finish()


async def _write_all_async(writer, gen_fn, request, loop):
    try:
        async for item in gen_fn(request):
            if writer.cancelled:
                break
            if writer.credit > 0:
                writer.write(item)  # has credit: does not wait
            else:
                await loop.run_in_executor(None, writer.write, item)
    except BaseException as exc:  # noqa: B902
        writer.fail(exc)
        if not isinstance(exc, Exception):
            raise
        return
    writer.finish()


def _pool(client, name, workers):
    """A pool of its own for a served name (serving it again replaces it)."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sluice-" + name)
    with _pools_lock:
        pools = client.__dict__.setdefault("_sluice_pools", {})
        old = pools.get(name)
        pools[name] = pool
    if old is not None:
        old.shutdown(wait=False)
    return pool


def serve(self, name, fn, *, max_concurrent=64, workers=8, loop=None):
    """Serves ``name`` with ``fn(args: dict) -> dict`` (or ``fn(args,
    request)``, to see the sluice.Request: caller, time_left, cancelled).

    A plain function runs on a pool of ``workers`` threads; an ``async def``
    on ``loop`` (by default the loop running now). At most
    ``max_concurrent`` calls are taken at once; more are answered
    Overloaded. A sluice.Error the handler raises reaches the caller with
    its own code; any other exception as HandlerFailed with its text.
    Serving a name again replaces its handler."""
    is_async = inspect.iscoroutinefunction(fn)
    fn = _bind(fn)
    if is_async:
        loop = loop or _running_loop_or_none()
        if loop is None:
            raise RuntimeError("serving an async def needs a running event loop (or loop=)")

        def dispatch(request, promise):
            asyncio.run_coroutine_threadsafe(_reply_async(promise, fn, request), loop)

    else:
        pool = _pool(self, name, workers)

        def dispatch(request, promise):
            pool.submit(_reply, promise, fn, request)

    self._serve(name, dispatch, max_concurrent, False)


def serve_stream(self, name, gen_fn, *, max_concurrent=64, workers=8, loop=None):
    """Serves ``name`` with a generator (or async generator) function of
    the arguments: each item it yields (a dict) is one item of the stream,
    sent as the caller's credit allows; returning ends the stream, raising
    fails it."""
    is_async = inspect.isasyncgenfunction(gen_fn)
    gen_fn = _bind(gen_fn)
    if is_async:
        loop = loop or _running_loop_or_none()
        if loop is None:
            raise RuntimeError("serving an async generator needs a running event loop (or loop=)")

        def dispatch(request, writer):
            asyncio.run_coroutine_threadsafe(_write_all_async(writer, gen_fn, request, loop), loop)

    else:
        pool = _pool(self, name, workers)

        def dispatch(request, writer):
            pool.submit(_write_all, writer, gen_fn, request)

    self._serve(name, dispatch, max_concurrent, True)


def _loop_future():
    """A future of the running loop, and the callback Sluice's threads call
    with (result, exception) to complete it there."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result, exc):
        if future.done():
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)

    def done(result, exc):
        try:
            loop.call_soon_threadsafe(settle, result, exc)
        except RuntimeError:
            pass  # the loop closed meanwhile

    return future, done


def call_async(self, target, method, args=None, *, timeout=None, routing="round_robin"):
    """Calls without waiting: an asyncio future of the result, completed on
    the running loop when the answer comes (no thread per call). Cancelling
    the future cancels the call."""
    future, done = _loop_future()
    cancel = self._call_async(target, method, args, timeout, routing, done)
    future.add_done_callback(lambda f: cancel() if f.cancelled() else None)
    return future


async def acall(self, target, method, args=None, *, timeout=None, routing="round_robin"):
    """``await c.acall(target, method, args)``: call() for asyncio."""
    return await call_async(self, target, method, args, timeout=timeout, routing=routing)


class Stream:
    """The calling end of a stream: iterate it (``for item in s``, or
    ``async for item in s``) for the items in order; an error ends it by
    raising. Leaving it before the end (close(), or a with block) cancels
    the stream."""

    #: How long one wait for an item lasts before signals are looked at.
    _slice = 0.1

    def __init__(self, inner):
        self._inner = inner
        self._done = False

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        while True:
            try:
                item = self._inner.next(self._slice)
            except BaseException:
                self._done = True
                raise
            if item is Ellipsis:
                continue  # no item within the slice: the stream goes on
            if item is None:
                self._done = True
                raise StopIteration
            return item

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self._done:
            raise StopAsyncIteration
        loop = asyncio.get_running_loop()
        while True:
            try:
                item = await loop.run_in_executor(None, self._inner.next, self._slice)
            except BaseException:
                self._done = True
                raise
            if item is Ellipsis:
                continue
            if item is None:
                self._done = True
                raise StopAsyncIteration
            return item

    def close(self):
        """Cancels the stream when it has not ended."""
        if not self._done:
            self._done = True
            self._inner.cancel()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to tell at collection
            pass


def call_stream(self, target, method, args=None, *, timeout=None, routing="round_robin", window=16):
    """Calls a name served with serve_stream; returns a Stream of its
    items. ``window``: items the handler may send ahead of what was read
    (1 to 1024); ``timeout``: the whole stream's deadline."""
    return Stream(self._call_stream(target, method, args, timeout, routing, window))


async def aget(self, key, *, raw=False, timeout=None):
    """get() for asyncio, completed on the running loop (no thread per call)."""
    future, done = _loop_future()
    self._get_async(key, raw, timeout, done)
    return await future


async def aput(self, key, value, *, timeout=None):
    """put() for asyncio, completed on the running loop (no thread per call).
    The value is copied once more than by put()."""
    future, done = _loop_future()
    self._put_async(key, value, timeout, done)
    return await future


Client.serve = serve
Client.serve_stream = serve_stream
Client.call_async = call_async
Client.acall = acall
Client.call_stream = call_stream
Client.aget = aget
Client.aput = aput

__all__ = ["Stream", "Error", "Timeout"]
