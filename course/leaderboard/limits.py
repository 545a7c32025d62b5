"""What one client, or many, can hold of the service: deadlines, shares and caps.

``leaderboard serve`` runs uvicorn with ``connections.protocol`` (header deadline, shedding
of idle connections near the cap, per-address and global caps on connections: see there)
and these choices:

- **Headers**: complete within ``HEADER_S`` (5 s; 1 s once half the connections are open);
  an idle kept-alive connection is closed after ``KEEP_ALIVE_S`` (uvicorn's own).
- **Bodies** (:func:`read_body`): at most ``MAX_BODY`` bytes (1 MiB, then ``413``), the
  whole within ``BODY_S`` (15 s), and never slower than ``MIN_RATE`` (64 KiB/s on average
  after ``RATE_GRACE_S``) nor silent for ``STALL_S`` (2 s): a body that trickles or stalls is
  cut with ``408``.  All bodies being read at once may hold ``BODIES_IN_FLIGHT`` bytes
  (64 MiB, then ``503``), and one client - its token, from any address; a request
  without one, its address - at most ``CLIENT_SHARE`` of it (8 MiB, then ``429``): no one
  client holds the budget, it holds its share for ``STALL_S`` at a time, and the rest is
  everyone else's (:func:`client_keys`).
- **Per client**: at most ``PER_CLIENT`` (64) open connections per client address
  (``--max-per-client``; the next is answered ``429`` at once), and as many requests at
  once per known token, from whatever address (:class:`PerClient`).  Behind a proxy every
  connection comes from the proxy's address: name it with ``--trusted-proxy`` (or serve
  on ``--uds``, where only the proxy connects) and its address may hold 3/4 of the
  connections; the address it forwards (the last ``X-Forwarded-For`` entry it added) is
  the client of a request without a token, which also joins one bounded pool of such
  requests - on a single-host hub any student can connect from the proxy's address and
  name any address, so a made-up one buys neither a new token share nor more of the
  pool.  ``X-Forwarded-For`` from any other peer is ignored.
- **In all**: ``--max-connections`` (default 2,048, never more than the open-file limit less
  256 for the database, the judges' pipes and logs): past it a connection gets ``503`` and a
  sentence as it opens (``connections.py``); uvicorn's ``limit_concurrency``, set above it
  by a backlog, is a backstop that never answers first.
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
import time

HEADER_S = 5.0  # request line + headers complete within this after (re)start
KEEP_ALIVE_S = 5  # an idle kept-alive connection is closed after this
PER_CLIENT = 64  # open connections per client address (requests, behind a trusted proxy)
MAX_CONNECTIONS = 2048  # in all (connections.protocol)
SHUTDOWN_S = 5  # a stop waits this long for open requests, no longer
FILES_KEPT = 256  # open files kept for the database, the judges' pipes, logs
MAX_BODY = 1 << 20  # bytes of a request (the source plus its unit)
BODY_S = 15.0  # seconds for a request's whole body to arrive
BODIES_IN_FLIGHT = 64 << 20  # bytes of bodies being read at once, all requests together
CLIENT_SHARE = BODIES_IN_FLIGHT // 8  # ... of which one address, or one token, may hold
MIN_RATE = 64 << 10  # bytes/s a body arrives at, on average, after ...
RATE_GRACE_S = 3.0  # ... this long (past STALL_S: a stall is told as one)
STALL_S = 2.0  # seconds a body may send nothing


class Refused(Exception):
    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class _Bodies:
    """Bytes of request bodies being read right now: in all, and per client key."""

    held = 0
    by_client: collections.Counter = collections.Counter()


def client_keys(request, token: str = "") -> tuple:
    """The key a request's body is counted under: its token when it carries one (known:
    the app checks it before reading a body), so one student is one client from every
    address - and every (address, token) pair is held to the share too; else its client
    address (the forwarded one behind a trusted proxy).  Not the address alone for a
    token's request: behind the hub's proxy or a NAT a class shares one address."""
    if token:
        return (f"token {token}",)
    return (f"address {request.client.host if request.client else ''}",)


def _take(keys: tuple, n: int) -> None:
    _Bodies.held += n
    for k in keys:
        _Bodies.by_client[k] += n


def _give(keys: tuple, n: int) -> None:
    _Bodies.held -= n
    for k in keys:
        _Bodies.by_client[k] -= n
        if _Bodies.by_client[k] <= 0:
            del _Bodies.by_client[k]


async def read_body(request, limit: int = MAX_BODY, keys: tuple | None = None) -> bytes:
    """The request's body, at most ``limit`` bytes, arriving at ``MIN_RATE`` without a
    stall of ``STALL_S`` and complete within ``BODY_S``, while the client (``keys``:
    :func:`client_keys`) holds at most ``CLIENT_SHARE`` of the bodies in flight; Refused
    (413, 408, 429, 503) otherwise.  A refused body closes the connection."""
    from starlette.requests import ClientDisconnect

    close = {"Connection": "close"}
    keys = client_keys(request) if keys is None else keys
    length = request.headers.get("content-length", "")
    if length.isdigit() and (len(length) > 18 or int(length) > limit):
        raise Refused(
            413, f"the request says it is {length[:24]} bytes; the limit is {limit:,}", close
        )
    chunks, held = [], 0
    t0 = last = time.monotonic()
    stream = request.stream().__aiter__()

    def slow(why: str) -> Refused:
        return Refused(408, f"the request's body {why}; the connection is closed", close)

    try:
        while True:
            now = time.monotonic()
            # how long it may wait for the next chunk: no stall, no average below MIN_RATE
            stall = STALL_S - (now - last)
            whole = BODY_S - (now - t0)
            behind = RATE_GRACE_S + held / MIN_RATE - (now - t0)
            if stall <= 0:
                raise slow(f"stopped arriving for {STALL_S:g} s")
            if whole <= 0:
                raise slow(f"did not arrive within {BODY_S:g} s")
            if behind <= 0:
                raise slow(f"arrived slower than {MIN_RATE >> 10} KiB/s")
            try:
                chunk = await asyncio.wait_for(stream.__anext__(), min(stall, whole, behind))
            except StopAsyncIteration:
                break
            except asyncio.TimeoutError:
                continue  # the checks above say which deadline passed
            last = time.monotonic()
            if held + len(chunk) > limit:
                raise Refused(413, f"the request is over the limit of {limit:,} bytes", close)
            if _Bodies.held + len(chunk) > BODIES_IN_FLIGHT:
                raise Refused(
                    503,
                    "the leaderboard is receiving too much at once; try again in a few seconds",
                    dict(close, **{"Retry-After": "5"}),
                )
            if any(_Bodies.by_client[k] + len(chunk) > CLIENT_SHARE for k in keys):
                raise Refused(
                    429,
                    f"you are sending more than {CLIENT_SHARE >> 20} MiB at once to the "
                    "leaderboard; wait for your other requests to finish",
                    dict(close, **{"Retry-After": "5"}),
                )
            chunks.append(chunk)
            held += len(chunk)
            _take(keys, len(chunk))
    except ClientDisconnect:
        raise Refused(400, "the request's body was cut off", close) from None
    finally:
        _give(keys, held)
    return b"".join(chunks)


INSTRUCTOR = "\x00instructor"  # PerClient's identify for the admin token: no student's name
UNIX_PEER = "unix"  # the client address of a connection on --uds (only the proxy reaches it)


async def _nothing(scope, receive, send) -> None:
    return None


class PerClient:
    """ASGI middleware: at most ``per_client`` requests at once per client, past it ``429``
    with a sentence.  A client is every key a request counts under, each capped:

    - its **token**, when the request carries a known one (``identify``), whatever the
      address it comes from or names: a forged ``X-Forwarded-For`` buys no new share (the
      instructor's token is not capped: only its address is, from an untrusted peer);
    - from any other peer, its **address** too (connections are capped per address in
      ``connections.protocol`` as well);
    - through a ``trusted`` proxy (``--trusted-proxy``, or every peer on ``--uds``), a
      request without a known token counts under the address the proxy forwards *and* in
      one pool of ``anonymous`` requests shared by everyone the proxy forwards without
      one: on a single-host hub any student can connect from the proxy's address and name
      any forwarded address, so made-up addresses only share that bounded pool.

    The proxy's ``X-Forwarded-For`` / ``X-Forwarded-Proto`` are applied here (uvicorn's
    ``ProxyHeadersMiddleware``, run only for a trusted peer), after the real peer is seen."""

    def __init__(
        self,
        app,
        per_client: int = PER_CLIENT,
        trusted: frozenset = frozenset(),
        identify=None,
        anonymous: int | None = None,
    ):
        from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

        self.app, self.per_client, self.trusted = app, per_client, frozenset(trusted)
        self.identify = identify or (lambda scope: None)
        self.anonymous = anonymous if anonymous is not None else max(per_client, 64)
        hosts = sorted(self.trusted | {UNIX_PEER})
        self.forward = ProxyHeadersMiddleware(_nothing, trusted_hosts=hosts)
        self.open: collections.Counter = collections.Counter()

    def _keys(self, peer: str, scope) -> list[tuple[str, int, str]]:
        """(key, cap, what is full) for each count the request joins."""
        who = self.identify(scope)
        keys = []
        if who and who != INSTRUCTOR:  # the instructor's tools may hold more at once
            keys.append((f"token {who}", self.per_client, "you already have"))
        if peer not in self.trusted and peer != UNIX_PEER:
            return [*keys, (f"address {peer}", self.per_client, "this address already has")]
        if who:
            return keys  # a known token through the proxy: capped by the token alone
        host = (scope.get("client") or ("",))[0]
        out = [("anonymous via proxy", self.anonymous, "readers without a token have")]
        if host != peer:  # its own count: a made-up address is no one's real one
            out.append((f"forwarded {host}", self.per_client, "this address already has"))
        return out

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope.get("client") is None:  # a Unix socket's peer has no address
            scope["client"] = (UNIX_PEER, 0)
        peer = scope["client"][0]
        if peer in self.trusted or peer == UNIX_PEER:
            await self.forward(scope, receive, send)  # the forwarded client and scheme
        keys = self._keys(peer, scope)
        for key, cap, whose in keys:
            if self.open[key] >= cap:
                return await _too_many(send, f"{whose} {cap} requests open to the leaderboard")
        for key, _, _ in keys:
            self.open[key] += 1
        try:
            return await self.app(scope, receive, send)
        finally:
            for key, _, _ in keys:
                self.open[key] -= 1
                if self.open[key] <= 0:
                    del self.open[key]


async def _too_many(send, what: str) -> None:
    body = json.dumps({"error": f"{what}; wait for one to finish"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", b"5"),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


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


def bind_unix(path: str, backlog: int = 2048) -> socket.socket:
    """A listening Unix socket at ``path``, mode 660 (its owner and group only: put the
    proxy's user in the service's group), or BindError.  A stale socket file that no one
    answers on is replaced; a live one, or any other file there, is not."""
    import os
    import stat

    if os.path.lexists(path):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise BindError(f"cannot serve on {path}: a file that is not a socket is there")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
            raise BindError(f"cannot serve on {path}: another program is serving there")
        except OSError:
            os.unlink(path)  # stale: its server is gone
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o117)  # made srw-rw---- from the start, never wider for a moment
    try:
        sock.bind(path)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise BindError(f"cannot serve on {path}: {exc.strerror or exc}") from None
    finally:
        os.umask(old)
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
