#!/usr/bin/env python3
"""relay.py - a man in the middle for tests/test_mac.sh: listens on 127.0.0.1:LISTEN, relays one
connection to 127.0.0.1:TARGET both ways, and in the direction client -> target (or, with a fourth
argument "back", target -> client) flips 7 bits in each of the 4 bytes from byte number FLIP on
(counted from the first byte sent that way; -1: flip nothing), so that a float there surely
changes. Prints "flipped" to stderr when it did. Ends when both sides closed, or after 60 s."""
import select, socket, sys, time

listen_port, target_port, flip = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
back = len(sys.argv) > 4 and sys.argv[4] == "back"
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", listen_port))
srv.listen(1)
srv.settimeout(60)
start = time.time()
cli, _ = srv.accept()
up = None
while up is None:  # the target may not listen yet
    try:
        up = socket.create_connection(("127.0.0.1", target_port), timeout=10)
    except ConnectionRefusedError:
        if time.time() > start + 20:
            raise
        time.sleep(0.05)
seen = 0
end = time.time() + 60
socks = [cli, up]
while socks and time.time() < end:
    r, _, _ = select.select(socks, [], [], 1)
    for s in r:
        data = s.recv(1 << 16)
        other = up if s is cli else cli
        if not data:
            socks.remove(s)
            try:
                other.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            continue
        watched = s is (up if back else cli)
        if watched and flip >= 0 and seen < flip + 4 and flip < seen + len(data):
            b = bytearray(data)
            for i in range(max(flip, seen), min(flip + 4, seen + len(data))):
                b[i - seen] ^= 0x7f
            data = bytes(b)
            print("flipped", file=sys.stderr, flush=True)
        if watched:
            seen += len(data)
        try:
            other.sendall(data)
        except OSError:
            socks = []
