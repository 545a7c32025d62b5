"""What one client, or many, can hold of the service: deadlines and caps on connections.

uvicorn (0.54, its h11 protocol) has no deadline for a request whose line and headers
trickle in, and a connection costs an open file for as long as it lasts: 1,100 slow
connections once made the service unreachable at the usual limit of 1,024 open files.
``leaderboard serve`` therefore runs uvicorn with :func:`protocol` (a subclass of uvicorn's
``H11Protocol`` passed as ``http=``) and these choices:

- **Headers**: the request line and headers must be complete ``HEADER_S`` (5 s) after the
  connection opens, or after the previous response on a kept-alive connection; past that a
  connection that sent part of a request gets ``408`` with a sentence and is closed, and an
  idle kept-alive one is closed silently (uvicorn's ``timeout_keep_alive``, also 5 s).
- **Bodies**: the app reads a body under ``asyncio.wait_for`` (``BODY_S``, 15 s, then
  ``408``), at most ``MAX_BODY`` bytes (1 MiB, then ``413``), and all bodies being read at
  once may hold ``BODIES_IN_FLIGHT`` bytes (64 MiB, then ``503`` with ``Retry-After``).
- **Per client**: at most ``PER_CLIENT`` (64) open connections per client address
  (``--max-per-client``); the next one is answered ``429`` with a sentence at once and closed.
  A request takes milliseconds, so a class behind one NAT rarely holds more than a few at
  once; behind a proxy every connection comes from the proxy's address: raise the cap there,
  or cap per client in the proxy.
- **In all**: uvicorn's ``limit_concurrency`` (``--max-connections``, default 2,048, never more
  than the open-file limit less 256 for the database, the judges' pipes and logs): requests
  past it get ``503``, and connections past it are answered ``503`` and closed at once, so
  no crowd holds more open files than that.
- **Open files**: at start the soft ``RLIMIT_NOFILE`` is raised to the hard limit, and the
  listen backlog (how many connections asyncio accepts at once, before any is looked at) is
  an eighth of it, so a burst is refused a batch at a time without running out of files.
- **No WebSockets** (``ws="none"``): an upgrade is a plain request, so no other protocol
  takes over a connection past these deadlines.
- **Stopping**: SIGTERM waits ``SHUTDOWN_S`` (5 s) for open requests, so no slow client
  holds a stop either.
- **Memory**: no ``RLIMIT_AS`` / ``RLIMIT_DATA`` on ``serve``: its judges (child processes)
  inherit rlimits, CUDA needs address space, and the ``flash_attention`` board's measurer
  needs ~32 GB; what the service itself holds is bounded instead - requests by the caps above,
  a judge's reply by its size check before it is read (``course/grading``), rows by the
  64 K-character source limit. To cap it from outside, run it under a cgroup
  (``systemd-run --scope -p MemoryMax=8G python -m course leaderboard serve ...``).
"""

from __future__ import annotations

import asyncio
import collections
import json
import resource
import socket

HEADER_S = 5.0  # request line + headers complete within this after (re)start
KEEP_ALIVE_S = 5  # an idle kept-alive connection is closed after this
PER_CLIENT = 64  # open connections per client address
MAX_CONNECTIONS = 2048  # in all (uvicorn's limit_concurrency)
SHUTDOWN_S = 5  # a stop waits this long for open requests, no longer
FILES_KEPT = 256  # open files kept for the database, the judges' pipes, logs
MAX_BODY = 1 << 20  # bytes of a request (the source plus its unit)
BODY_S = 15.0  # seconds for a request's whole body to arrive
BODIES_IN_FLIGHT = 64 << 20  # bytes of bodies being read at once, all requests together


class Refused(Exception):
    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class _Bodies:
    """Bytes of request bodies being read right now, across every request."""

    held = 0


async def read_body(request, limit: int = MAX_BODY) -> bytes:
    """The request's body, at most ``limit`` bytes, complete within ``BODY_S``; Refused
    (413, 408, 503) otherwise.  A refused body closes the connection."""
    from starlette.requests import ClientDisconnect

    close = {"Connection": "close"}
    length = request.headers.get("content-length", "")
    if length.isdigit() and (len(length) > 18 or int(length) > limit):
        raise Refused(
            413, f"the request says it is {length[:24]} bytes; the limit is {limit:,}", close
        )
    chunks, held = [], 0

    async def read():
        nonlocal held
        async for chunk in request.stream():
            if held + len(chunk) > limit:
                raise Refused(413, f"the request is over the limit of {limit:,} bytes", close)
            if _Bodies.held + len(chunk) > BODIES_IN_FLIGHT:
                raise Refused(
                    503,
                    "the leaderboard is receiving too much at once; try again in a few seconds",
                    dict(close, **{"Retry-After": "5"}),
                )
            chunks.append(chunk)
            held += len(chunk)
            _Bodies.held += len(chunk)

    try:
        await asyncio.wait_for(read(), BODY_S)
    except ClientDisconnect:
        raise Refused(400, "the request's body was cut off", close) from None
    except asyncio.TimeoutError:
        raise Refused(
            408, f"the request's body did not arrive within {BODY_S:g} s", close
        ) from None
    finally:
        _Bodies.held -= held
    return b"".join(chunks)


class BindError(Exception):
    """The port cannot be served; the message names it and says why (one sentence)."""


def bind(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening socket on ``host:port``, or BindError: done before anything says
    "serving", so a taken port is told at once."""
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise BindError(
            f"--host {host} is not an address this machine can serve on ({exc})"
        ) from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        import errno

        why = {
            errno.EADDRINUSE: "it is already in use (another leaderboard or program is "
            "serving there)",
            errno.EACCES: "permission denied (ports below 1024 need root)",
            errno.EADDRNOTAVAIL: f"{host} is not an address of this machine",
        }.get(exc.errno or 0, exc.strerror or str(exc))
        raise BindError(
            f"cannot serve on port {port} of {host}: {why}; choose another --port"
        ) from None
    return sock


def raise_open_files() -> int:
    """Raise the soft limit of open files to the hard limit; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
    if want > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return soft


def backlog(open_files: int) -> int:
    """The listen backlog, which is also how many connections asyncio accepts in one go
    before any of them is looked at: an eighth of the open files (128 to 2,048), so a burst
    past the per-client cap is refused a batch at a time instead of running out of files."""
    return max(128, min(2048, open_files // 8))


def max_connections(asked: int, open_files: int) -> int:
    """The cap in all: what was asked, within the open files less those kept."""
    return max(16, min(asked, open_files - FILES_KEPT))


def _answer(status: int, reason: str, message: str, retry: str | None = None) -> bytes:
    body = json.dumps({"error": message}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n"
        + (f"retry-after: {retry}\r\n" if retry else "")
        + "\r\n"
    )
    return head.encode() + body


def protocol(
    per_client: int = PER_CLIENT, header_s: float = HEADER_S, most: int = MAX_CONNECTIONS
) -> type:
    """uvicorn's h11 protocol with a header deadline and per-client and global caps (one
    class per server: the counts live in it)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    counts: collections.Counter = collections.Counter()

    class Guarded(H11Protocol):
        counts: dict
        _timer = None
        _key = None
        _got = False

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            key = self.client[0] if self.client else ""
            if counts[key] >= per_client:
                transport.write(
                    _answer(
                        429,
                        "Too Many Requests",
                        f"this address already has {per_client} "
                        "connections open to the leaderboard; close one and try again",
                        "5",
                    )
                )
                transport.close()
                return
            if len(self.connections) > most:
                transport.write(
                    _answer(
                        503,
                        "Service Unavailable",
                        f"the leaderboard has {most} connections "
                        "open, its limit; try again in a few seconds",
                        "5",
                    )
                )
                transport.close()
                return
            counts[key] += 1
            self._key = key
            self._arm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            if self._key is not None:
                counts[self._key] -= 1
                if counts[self._key] <= 0:
                    del counts[self._key]
                self._key = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._timer is not None:
                self._got = True
            super().data_received(data)

        def handle_events(self) -> None:
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle:  # a request line and headers were complete
                self._disarm()

        def on_response_complete(self) -> None:
            self._arm()  # the next request has header_s too; armed
            super().on_response_complete()  # first: a pipelined one disarms it at once

        def send_400_response(self, msg: str) -> None:
            """Malformed HTTP: a 400 with a sentence if no response has begun, and close.
            (uvicorn's own would also answer mid-response - a body that turns malformed
            after the app answered - and break h11's state; the app's reply still due is
            dropped: its client is gone.)"""
            import h11

            if self.cycle is not None and not self.cycle.response_complete:
                self.cycle.disconnected = True
                self.cycle.message_event.set()
            if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE) and (
                self.cycle is None or not self.cycle.response_started
            ):
                self.transport.write(
                    _answer(
                        400,
                        "Bad Request",
                        "this is not a valid HTTP/1.1 request; the connection is closed",
                    )
                )
            self.transport.close()

        def _arm(self) -> None:
            self._disarm()
            self._got = False
            self._timer = self.loop.call_later(header_s, self._too_slow)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _too_slow(self) -> None:
            self._timer = None
            if self.transport.is_closing():
                return
            if self._got:
                self.transport.write(
                    _answer(
                        408,
                        "Request Timeout",
                        f"the request line and headers did not arrive "
                        f"within {header_s:g} s; the connection is closed",
                    )
                )
            self.transport.close()

    Guarded.counts = counts
    return Guarded
