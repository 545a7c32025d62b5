"""What connections a crowd can hold: uvicorn's h11 protocol with a header deadline, a cap
per client address, a cap in all, and shedding of idle connections near that cap.

uvicorn (0.54, its h11 protocol) has no deadline for a request whose line and headers
trickle in, so :func:`protocol` (passed as ``http=``) adds, per connection:

- **Header deadline**: the request line and headers complete ``header_s`` (5 s) after the
  connection opens or after the previous response on a kept-alive connection; past that a
  connection that sent part of a request gets ``408`` with a sentence and is closed, an idle
  one is closed silently.  Once more than half of ``most`` connections are open, a
  connection (re)armed gets ``BUSY_HEADER_S`` (1 s) instead.
- **Shedding**: a connection that has not completed a request's headers is idle by
  definition once it has sent part of one, or ``SHED_AGE_S`` (0.25 s) after it was opened
  or answered (a request's headers arrive in one packet; one accepted in the same burst and
  not read yet is not idle).  When a new
  connection brings the count to ``most`` less an eighth, the oldest idle ones are closed (a
  ``408`` if they had sent part of a request) until the count is below that mark again:
  slow or idle connections, however many addresses they come from, cannot hold every slot,
  and a client that sends its request at once is always let in.
- **Per client address**: at most ``per_client`` connections; the next is answered ``429``
  with a sentence and closed.  A ``trusted`` proxy's address (``serve --trusted-proxy``;
  ``""``, a Unix socket's peer, on ``--uds``) carries every client behind it, so it may
  hold up to ``PROXY_SHARE`` (3/4) of ``most`` instead - never all of them: on a
  single-host hub every student's own server has that address too.  Requests behind it
  are capped per token and forwarded address (:class:`limits.PerClient`).
- **In all**: a connection that finds ``most`` open and none idle to shed (a burst accepted
  before any of it is read) is let in on probation - its headers due within
  ``PROBATION_S`` (0.5 s), so a whole request is served and a partial one is the next to
  be shed - up to a sixteenth over ``most`` (within the files ``limits.FILES_KEPT``
  keeps); past that it is answered ``503`` with a sentence and closed at once.
"""

from __future__ import annotations

import collections
import itertools
import json

BUSY_HEADER_S = 1.0  # the header deadline once over half of the connections are open
PROBATION_S = 0.5  # the header deadline of a connection let in past the cap
SHED_AGE_S = 0.25  # a connection waiting for headers this long is idle (not just unread)
PROXY_SHARE = 0.75  # of all connections, the most a trusted proxy's address may hold


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
    per_client: int = 64,
    header_s: float = 5.0,
    most: int = 2048,
    trusted: frozenset = frozenset(),
) -> type:
    """uvicorn's h11 protocol with a header deadline, shedding, and per-client and global
    caps (one class per server: the counts live in it)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    counts: collections.Counter = collections.Counter()
    waiting: collections.OrderedDict = collections.OrderedDict()  # no headers yet, oldest first
    shed_at = max(2, most - most // 8)
    proxy_cap = max(per_client, int(most * PROXY_SHARE))

    class Guarded(H11Protocol):
        counts: dict
        waiting: dict
        shed: list
        _timer = None
        _key = None
        _got = False
        _leaving = False

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            key = self.client[0] if self.client else ""
            cap = proxy_cap if key in trusted else per_client
            if counts[key] >= cap:
                whose = "the proxy's address" if key in trusted else "this address"
                transport.write(
                    _answer(
                        429,
                        "Too Many Requests",
                        f"{whose} already has {cap} connections open to the "
                        "leaderboard; close one and try again",
                        "5",
                    )
                )
                self._leave()
                return
            over = len(self.connections) - Guarded.shed[1] - shed_at + 1
            if over > 0:
                self._shed(over)
            live = len(self.connections) - Guarded.shed[1]
            if live > most + most // 16:
                transport.write(
                    _answer(
                        503,
                        "Service Unavailable",
                        f"the leaderboard has {most} connections "
                        "open, its limit; try again in a few seconds",
                        "5",
                    )
                )
                self._leave()
                return
            counts[key] += 1
            self._key = key
            self._arm(on_probation=live > most)

        def connection_lost(self, exc) -> None:
            self._disarm()
            if self._leaving:
                Guarded.shed[1] -= 1  # it no longer counts in self.connections
                self._leaving = False
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

        def _arm(self, on_probation: bool = False) -> None:
            self._disarm()
            self._got = False
            busy = len(self.connections) > most // 2
            self._deadline = min(header_s, BUSY_HEADER_S) if busy else header_s
            if on_probation:
                self._deadline = min(self._deadline, PROBATION_S)
            self._timer = self.loop.call_later(self._deadline, self._too_slow)
            waiting[self] = self.loop.time()

        def _disarm(self) -> None:
            waiting.pop(self, None)
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _leave(self) -> None:
            """Close it, and count it out of ``self.connections`` (where it stays until it is
            lost): a storm of refused connections must not look like a full house."""
            if not self.transport.is_closing():
                Guarded.shed[1] += 1
                self._leaving = True
            self.transport.close()

        def _shed(self, over: int) -> None:
            """Close the ``over`` oldest idle connections: waiting for headers, and either
            sent part of a request or armed ``SHED_AGE_S`` ago (one accepted in this same
            burst and not read yet is not idle: its request may be whole)."""
            young = self.loop.time() - SHED_AGE_S
            victims = []
            for conn, since in itertools.islice(waiting.items(), 4 * over + 64):
                if conn._got or since < young:
                    victims.append(conn)
                    if len(victims) == over:
                        break
            for conn in victims:
                waiting.pop(conn, None)
                conn._shed_now()

        def _shed_now(self) -> None:
            """Closed to make room: the oldest connection without a request's headers."""
            Guarded.shed[0] += 1
            self._close_idle(
                "the leaderboard is near its limit of connections and this one had "
                "not sent a whole request; the connection is closed"
            )

        def _too_slow(self) -> None:
            self._close_idle(
                f"the request line and headers did not arrive within "
                f"{self._deadline:g} s; the connection is closed"
            )

        def _close_idle(self, message: str) -> None:
            self._disarm()
            if self.transport.is_closing():
                return
            if self._got:
                self.transport.write(_answer(408, "Request Timeout", message))
            self._leave()

    Guarded.counts = counts
    Guarded.waiting = waiting
    Guarded.shed = [0, 0]  # connections shed in all, shed and not yet lost
    return Guarded
