#!/usr/bin/env python3
"""What authentication adds to a new connection: the time from TCP connect to a first
answered ApiVersions on Strand's PLAINTEXT listener, against connect, ApiVersions,
SaslHandshake and a whole SCRAM-SHA-256 (or -512) exchange on its SASL_PLAINTEXT listener,
as a Kafka client makes them (the client's PBKDF2 included, 4096 iterations, the Kafka
minimum; RFC 5802 written out here, raw frames over loopback). Medians of many connections.

    bench/sasl_handshake.py                      # 300 connections each
    bench/sasl_handshake.py --connections 100 --mechanism SCRAM-SHA-512
"""
import argparse
import base64
import hashlib
import hmac
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "interop" / "python"))
from broker_process import broker_from, free_port, one_node_properties  # noqa: E402

from confluent_kafka.admin import (  # noqa: E402
    AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion)

PASSWORD = b"bench-secret"


def frame(api_key, version, correlation, body, client=b"bench"):
    header = struct.pack(">hhih", api_key, version, correlation, len(client)) + client
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def call(sock, data):
    sock.sendall(data)
    size = struct.unpack(">i", read(sock, 4))[0]
    return read(sock, size)[4:]  # after the correlation id (header v0)


def read(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def api_versions(sock):
    call(sock, frame(18, 0, 1, b""))


def string(text):
    return struct.pack(">h", len(text)) + text


def scram(sock, mechanism):
    digest = hashlib.sha256 if mechanism == "SCRAM-SHA-256" else hashlib.sha512
    answer = call(sock, frame(17, 1, 2, string(mechanism.encode())))
    assert struct.unpack(">h", answer[:2])[0] == 0, "handshake refused"
    nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n=bench,r={nonce}"

    def authenticate(token, correlation):
        answer = call(sock, frame(36, 1, correlation, struct.pack(">i", len(token)) + token))
        code = struct.unpack(">h", answer[:2])[0]
        message_len = struct.unpack(">h", answer[2:4])[0]
        rest = answer[4 + max(message_len, 0):]
        assert code == 0, f"authentication failed ({code})"
        length = struct.unpack(">i", rest[:4])[0]
        return rest[4:4 + length].decode()

    server_first = authenticate(f"n,,{first_bare}".encode(), 3)
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(digest().name, PASSWORD, base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = digest(client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, digest).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    authenticate(f"{without_proof},p={proof}".encode(), 4)


def connect_ms(port, authenticate):
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        api_versions(sock)
        if authenticate:
            authenticate(sock)
    return (time.perf_counter() - started) * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--mechanism", default="SCRAM-SHA-256", choices=["SCRAM-SHA-256", "SCRAM-SHA-512"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
        properties = one_node_properties(d, ports, [f"sasl.enabled.mechanisms={args.mechanism}"])
        with broker_from(properties, d):
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
            mechanism = getattr(ScramMechanism, args.mechanism.replace("-", "_"))
            upsert = UserScramCredentialUpsertion("bench", ScramCredentialInfo(mechanism, 4096), PASSWORD)
            admin.alter_user_scram_credentials([upsert])["bench"].result(30)
            plain = [connect_ms(ports["PLAINTEXT"], None) for _ in range(args.connections)]
            sasl = [connect_ms(ports["SASL_PLAINTEXT"], lambda s: scram(s, args.mechanism))
                    for _ in range(args.connections)]
    plain_ms, sasl_ms = statistics.median(plain), statistics.median(sasl)
    print(f"| connection | median ms |\n|---|---:|\n| PLAINTEXT: connect, ApiVersions | {plain_ms:.3f} |\n"
          f"| SASL_PLAINTEXT: connect, ApiVersions, {args.mechanism} (4096 iterations) | {sasl_ms:.3f} |\n"
          f"| added by authentication | {sasl_ms - plain_ms:.3f} |")


if __name__ == "__main__":
    main()
