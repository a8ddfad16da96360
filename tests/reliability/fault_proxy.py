"""A TCP proxy in front of an S3 endpoint that misbehaves on demand, for fault injection at the HTTP level.

Modes (``proxy.mode = ...``), applied to new connections and to open ones at their next chunk:

- ``pass``      forward both ways;
- ``refuse``    stop listening: connecting fails with ECONNREFUSED;
- ``reset``     accept and close at once (an open connection is closed mid-exchange);
- ``hang``      accept and never answer (closed when the mode changes);
- ``error500``  answer every request ``500 InternalError``;
- ``slowdown``  answer every request ``503 SlowDown`` (S3's throttling answer).

Test scaffolding only (tests/reliability); no part of Sluice depends on it.
"""

from __future__ import annotations

import socket
import threading
import time

_ERRORS = {
    "error500": (500, "Internal Server Error", "InternalError", "We encountered an internal error. Please try again."),
    "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
}


class FaultProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._mode = "pass"
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._listener: socket.socket | None = None
        self.port = 0
        self._listen()
        self.connections = 0

    # -- control -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, mode: str) -> None:
        if mode not in ("pass", "refuse", "reset", "hang", *_ERRORS):
            raise ValueError(f"unknown proxy mode {mode!r}")
        with self._lock:
            previous, self._mode = self._mode, mode
            if mode == "refuse" and self._listener is not None:
                self._listener.close()
                self._listener = None
            elif previous == "refuse" and mode != "refuse":
                self._listen()

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None

    # -- serving -------------------------------------------------------------------------------

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed: refuse mode, or stopped
            self.connections += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        mode = self._mode
        try:
            if mode == "reset":
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                return
            if mode == "hang":
                while self._mode == "hang" and not self._stopped.is_set():
                    time.sleep(0.1)
                return
            if mode in _ERRORS:
                self._answer_error(client, mode)
                return
            self._pipe(client)
        finally:
            try:
                client.close()
            except OSError:
                pass

    def _answer_error(self, client: socket.socket, mode: str) -> None:
        client.settimeout(5)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = client.recv(65536)
                if not chunk:
                    return
                data += chunk
        except OSError:
            return
        status, reason, code, message = _ERRORS[mode]
        body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{message}</Message>'
                "</Error>").encode()
        head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n").encode()
        try:
            client.sendall(head + body)
        except OSError:
            pass

    def _pipe(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            return
        upstream.settimeout(None)
        done = threading.Event()

        def forward(src: socket.socket, dst: socket.socket) -> None:
            try:
                while not done.is_set():
                    chunk = src.recv(65536)
                    if not chunk or self._mode != "pass":
                        break
                    dst.sendall(chunk)
            except OSError:
                pass
            finally:
                done.set()
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        other = threading.Thread(target=forward, args=(upstream, client), daemon=True)
        other.start()
        forward(client, upstream)
        other.join(timeout=10)
        upstream.close()
