#!/usr/bin/env python3
"""drop_relay.py - a link that drops once, for tests/test_zmq_drop.sh: listens on 127.0.0.1:LISTEN
and relays every connection to 127.0.0.1:TARGET both ways, except that the connection carrying
the Nth zmq handshake message ("DDLZ") in direction DIR (up: client -> target, back: target ->
client) is closed at that message, which is not passed on: the message is lost with its
connection, as when a link drops under load. Later connections are relayed faithfully. Prints
"dropped" to stderr when it did. Ends after 30 s."""
import select, socket, sys, time

listen_port, target_port, nth, way = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", listen_port))
srv.listen(8)
pairs = {}      # socket -> (its partner, direction of what is read from it)
seen = 0        # handshake messages seen in direction `way`
dropped = False
end = time.time() + 30


def close(s):
    other, _ = pairs.pop(s, (None, None))
    s.close()
    if other is not None and other in pairs:
        pairs.pop(other)
        other.close()


while time.time() < end:
    r, _, _ = select.select([srv] + list(pairs), [], [], 0.5)
    for s in r:
        if s is srv:
            cli, _ = srv.accept()
            try:
                up = socket.create_connection(("127.0.0.1", target_port), timeout=5)
            except OSError:
                cli.close()
                continue
            pairs[cli] = (up, "up")
            pairs[up] = (cli, "back")
            continue
        if s not in pairs:
            continue
        other, d = pairs[s]
        try:
            data = s.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            close(s)
            continue
        if not dropped and d == way:
            seen += data.count(b"DDLZ")
            if seen >= nth:
                dropped = True
                print("dropped", file=sys.stderr, flush=True)
                close(s)
                continue
        try:
            other.sendall(data)
        except OSError:
            close(s)
