"""A fast callback receiver for the benchmark: answers 200 {"message":"ok"}, logs receipt times.

Run: python bench/receiver.py PORT OUTFILE. Each line of OUTFILE: <unix time> <X-Kasir-Callback-Id>.
"""

from __future__ import annotations

import asyncio
import sys
import time

RESPONSE = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{"message":"ok"}'


async def main(port: int, out_path: str) -> None:
    out = open(out_path, "a", buffering=1)  # noqa: SIM115 (held for the process lifetime)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                received = time.time()
                length, callback_id = 0, "-"
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    lowered = name.strip().lower()
                    if lowered == b"content-length":
                        length = int(value.strip())
                    elif lowered == b"x-kasir-callback-id":
                        callback_id = value.strip().decode()
                if length:
                    await reader.readexactly(length)
                out.write(f"{received:.6f} {callback_id}\n")
                writer.write(RESPONSE)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
