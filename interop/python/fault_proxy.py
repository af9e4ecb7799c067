"""A TCP proxy on loopback that forwards Kafka traffic and, every `drop_every`-th
response chunk, cuts the connection instead of delivering it: the request was handled
but the client never hears back, so it retries. The broker must advertise the proxy's
address so clients keep going through it."""
import socket
import threading


class FaultProxy:
    def __init__(self, listen_port, target_port, drop_every):
        self.listen_port, self.target_port, self.drop_every = listen_port, target_port, drop_every
        self.responses = 0
        self.dropped = 0
        self.lock = threading.Lock()
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", listen_port))
        self.server.listen(64)
        self.running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while self.running:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, True), daemon=True).start()

    def _pipe(self, source, sink, is_response):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if is_response and self.drop_every:
                    with self.lock:
                        self.responses += 1
                        drop = self.responses % self.drop_every == 0
                        if drop:
                            self.dropped += 1
                    if drop:
                        break
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.running = False
        self.server.close()
