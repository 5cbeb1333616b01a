"""`tortus-pg serve --workers N` hands its workers a listening socket on which asyncio turns
Nagle's algorithm off for every accepted connection (uvicorn's own leaves it on, which costs a
keep-alive response ~40 ms)."""

from __future__ import annotations

import asyncio
import socket

from tortus_pg.api.server import TcpConfig


async def _accepted_nodelay(listener: socket.socket) -> int:
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Report(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Report, sock=listener)
    port = listener.getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        return await asyncio.wait_for(seen, 10)
    finally:
        writer.close()
        server.close()


def test_the_workers_socket_gives_accepted_connections_tcp_nodelay() -> None:
    listener = TcpConfig("tortus_pg.api.app:create_app", factory=True, host="127.0.0.1", port=0,
                          workers=2).bind_socket()
    assert listener.proto == socket.IPPROTO_TCP
    assert asyncio.run(_accepted_nodelay(listener)) != 0
