"""Sluice's exceptions: one class per error code, all under sluice.Error."""


class Error(Exception):
    """A Sluice call failed. ``code`` names why ("not_found", "timeout", ...);
    the message is the one the cluster gave."""

    code = "error"


class NotFound(Error, LookupError):
    """The key (or name) has no committed version."""

    code = "not_found"


class Timeout(Error, TimeoutError):
    """The deadline passed before an answer came."""

    code = "timeout"


class Unavailable(Error, ConnectionError):
    """A node needed for the request is down or unreachable."""

    code = "unavailable"


class ClientClosed(Unavailable):
    """The client was closed: neither it nor the views it returned may be used."""

    code = "unavailable"


class NoCapacity(Error):
    """No room for the value, even after eviction."""

    code = "no_capacity"


class Conflict(Error):
    """A condition on the current version did not hold."""

    code = "conflict"


class InvalidArgument(Error, ValueError):
    """The request itself is wrong: a bad key, size, value or option."""

    code = "invalid_argument"


class PermissionDenied(Error, PermissionError):
    """The caller may not do this."""

    code = "permission_denied"


class Aborted(Error):
    """The operation was stopped before it finished."""

    code = "aborted"


class Internal(Error):
    """A bug in Sluice; the message says where."""

    code = "internal"


class Overloaded(Error):
    """A bounded queue or limit was hit; retry later."""

    code = "overloaded"


class Protocol(Error):
    """A peer sent a malformed or incompatible frame."""

    code = "protocol"


class Cancelled(Error):
    """The caller cancelled the operation."""

    code = "cancelled"


class HandlerFailed(Error):
    """A called handler raised or broke its promise; the message is its own."""

    code = "handler_failed"


# The numbers are the C++ errc values (sluice/error.hpp): pinned.
by_code = {
    1: NotFound,
    2: Timeout,
    3: Unavailable,
    4: NoCapacity,
    5: Conflict,
    6: InvalidArgument,
    7: PermissionDenied,
    8: Aborted,
    9: Internal,
    10: Overloaded,
    11: Protocol,
    12: Cancelled,
    13: HandlerFailed,
}
