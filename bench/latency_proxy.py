"""A TCP proxy that delays every chunk by a fixed time in each direction: a database "across the network".

    python -m bench.latency_proxy LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS

Each direction forwards chunks in order, each one ``DELAY_MS`` after it arrived (pipelined, as a
network link is: the delay adds latency, not a bandwidth cap), so a round trip costs 2 × DELAY_MS.
Run it in its own process (:func:`start`) so it takes no time from the measured event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def forward() -> None:
        loop = asyncio.get_running_loop()
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    task = asyncio.ensure_future(forward())
    loop = asyncio.get_running_loop()
    try:
        while data := await reader.read(65536):
            queue.put_nowait((loop.time() + delay, data))
    except ConnectionError:
        pass
    queue.put_nowait((0.0, b""))
    with contextlib.suppress(ConnectionError):
        await task


async def serve(port: int, host: str, target_port: int, delay: float) -> None:
    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        sock = client_writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        server_reader, server_writer = await asyncio.open_connection(host, target_port)
        server_writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(_pipe(client_reader, server_writer, delay), _pipe(server_reader, client_writer, delay))

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(host: str, target_port: int, round_trip_ms: float) -> tuple[subprocess.Popen, int]:
    """Start the proxy in a subprocess; returns it and the port it listens on (ready to connect)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.latency_proxy", str(port), host, str(target_port), str(round_trip_ms / 2)]
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return process, port
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the latency proxy did not start")


if __name__ == "__main__":
    listen, target_host, target_port, delay_ms = sys.argv[1:5]
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(int(listen), target_host, int(target_port), float(delay_ms) / 1000))
