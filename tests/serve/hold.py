#!/usr/bin/env python3
"""hold.py PORT MODE N PATH [FILE] - open N connections to ddl-serve on 127.0.0.1:PORT and keep
them open, so that test_serve_limits.sh can read what the server holds for them (its RSS):
  replies: each POSTs FILE to PATH (keep-alive), reads the whole reply, then idles;
  bodies:  each sends a request to PATH declaring 4,000,000 body bytes and sends all but one of
           them, then idles with its request unfinished.
Prints "ready" once every connection is in that state, then waits for its stdin to close."""
import socket
import sys

port, mode, n, path = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
conns = []


def read_reply(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a reply")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed in the reply")
        body += chunk
    return int(head.split()[1])


if mode == "replies":
    body = open(sys.argv[5], "rb").read()
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\n\r\n" % (path, len(body))).encode() + body)
        status = read_reply(s)
        if status != 200:
            print("status %d" % status, flush=True)
            sys.exit(1)
        conns.append(s)
else:
    total = 4000000
    part = b"\0" * (total - 1)
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % (path, total)).encode())
        s.sendall(part)
        conns.append(s)
print("ready", flush=True)
sys.stdin.read()
