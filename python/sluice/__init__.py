"""Sluice from Python: a zero-copy key-value cache for tensors and blobs.

    import sluice, numpy as np
    with sluice.connect() as c:              # the owner of this host
        c.put("x", np.arange(8, dtype=np.float32))
        x = np.from_dlpack(c.get("x"))       # a view of the owner's memory

See docs/python.md for the API, the lifetimes and what copies when.
"""

import os as _os

from sluice._errors import (
    Aborted,
    Cancelled,
    ClientClosed,
    Conflict,
    Error,
    HandlerFailed,
    Internal,
    InvalidArgument,
    NoCapacity,
    NotFound,
    Overloaded,
    PermissionDenied,
    Protocol,
    Timeout,
    Unavailable,
)
from sluice._sluice import Client, Consumer, LocalCluster, Message, Producer, Request, Reservation, StreamWriter, View
from sluice._rpc import Stream
from sluice._mq import Produced

__all__ = [
    "connect",
    "Client",
    "LocalCluster",
    "Reservation",
    "View",
    "Request",
    "Stream",
    "StreamWriter",
    "Producer",
    "Produced",
    "Consumer",
    "Message",
    "DEFAULT_ADDRESS",
    "Error",
    "NotFound",
    "Timeout",
    "Unavailable",
    "ClientClosed",
    "NoCapacity",
    "Conflict",
    "InvalidArgument",
    "PermissionDenied",
    "Aborted",
    "Internal",
    "Overloaded",
    "Protocol",
    "Cancelled",
    "HandlerFailed",
]

#: Where connect() goes when given no address and SLUICE_ADDRESS is unset:
#: the owner `sluice up` and `sluice owner` start by default.
DEFAULT_ADDRESS = "127.0.0.1:7070"


def connect(
    address=None,
    *,
    timeout=5.0,
    connect_timeout=5.0,
    name="python",
    transport="auto",
    keepalive=2.0,
):
    """Connects to the owner at ``address`` ("host:port"; default: the
    SLUICE_ADDRESS environment variable, else DEFAULT_ADDRESS).

    ``timeout``: seconds a call may take unless it gives its own.
    ``connect_timeout``: seconds to wait for the owner to answer.
    ``transport``: "auto" (shared memory when the owner is on this host,
    else TCP), "shm" or "tcp". ``keepalive``: seconds between the client's
    signs of life, which keep its session and pins.
    Raises Unavailable when nothing answers in time."""
    if address is None:
        address = _os.environ.get("SLUICE_ADDRESS", DEFAULT_ADDRESS)
    return _sluice_connect(address, timeout, connect_timeout, name, transport, keepalive)


from sluice._sluice import _connect as _sluice_connect  # noqa: E402
