"""MQ from Python: Client.producer() and Client.consumer(), with the
iterator protocols of Consumer (docs/mq.md, docs/python.md).

    p = c.producer("camera-1")
    p.create_topic("frames", partitions=4)
    p.produce("frames", {"meta": b"...", "image": tensor}, key="cam1")

    with c.consumer("decoders", ["frames"]) as consumer:
        for msg in consumer:              # or: async for msg in consumer
            use(msg.value)                # a View or a dict of Views, in the pool
            msg.ack()
"""

import asyncio
import collections
from typing import NamedTuple

from sluice._sluice import Client, Consumer


class Produced(NamedTuple):
    """Where a produced message was committed. ``duplicate``: the topic's
    dedupe window had its msg_id, nothing was appended, and (partition,
    offset) are the first produce's."""

    partition: int
    offset: int
    duplicate: bool


def consumer(
    self,
    group,
    topics,
    *,
    ack_timeout=30.0,
    max_deliveries=5,
    prefetch=16,
    from_latest=False,
    lease=10.0,
    batch=16,
    wait=1.0,
    timeout=None,
):
    """Joins ``group`` (created for ``topics`` if new) as a new member and
    returns its Consumer.

    ``ack_timeout``: seconds after which an unacked delivery goes out
    again. ``max_deliveries``: deliveries of one message at most, then it
    is dead. ``prefetch``: deliveries this member holds unacked at most.
    ``from_latest``: a new group starts at the end of each partition.
    ``lease``: a member that does not poll for this many seconds is
    dropped and its messages go to the others. ``batch`` and ``wait``:
    what each poll of the iterator asks for (messages, seconds).
    """
    if isinstance(topics, str):
        topics = [topics]
    return self._consumer(
        group,
        list(topics),
        float(ack_timeout),
        int(max_deliveries),
        int(prefetch),
        bool(from_latest),
        float(lease),
        int(batch),
        float(wait),
        timeout,
    )


def _buffered(self):
    try:
        return self._pending
    except AttributeError:
        self._pending = collections.deque()
        return self._pending


def _iter(self):
    return self


def _next(self):
    """The next message, polling ``batch`` at a time; StopIteration once
    the consumer is closed."""
    pending = _buffered(self)
    while True:
        if self.closed:
            pending.clear()
            raise StopIteration
        if pending:
            return pending.popleft()
        pending.extend(self.poll(self.batch))


def _aiter(self):
    return self


async def _anext(self):
    """The next message for ``async for``: each poll waits on the loop's
    default executor, so the loop runs on meanwhile."""
    pending = _buffered(self)
    loop = asyncio.get_running_loop()
    while True:
        if self.closed:
            pending.clear()
            raise StopAsyncIteration
        if pending:
            return pending.popleft()
        pending.extend(await loop.run_in_executor(None, self.poll, self.batch))


def _enter(self):
    return self


def _exit(self, *exc):
    self.close()
    return False


Client.consumer = consumer
Consumer.__iter__ = _iter
Consumer.__next__ = _next
Consumer.__aiter__ = _aiter
Consumer.__anext__ = _anext
Consumer.__enter__ = _enter
Consumer.__exit__ = _exit

__all__ = ["Produced"]
