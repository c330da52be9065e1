# zmtp_stranger.py HOST PORT N [PLAIN USER PASSWORD] - a stranger who speaks ZeroMQ's wire
# protocol (ZMTP 3.1, RFC 23) to a rank's ROUTER: greets with the NULL mechanism, or PLAIN (RFC 24)
# with the user and password given, and if the rank lets it through (its READY comes back), sends
# N one-byte messages and a PING in one write, then resets the connection: what made libzmq 4.3.4
# abort the rank (libzmq issue #4364: it answers the PING on the failed engine once the pipe
# drains). N = 0: neither messages nor PING, a plain close. Prints one line
# "mechanism=NAME passed=0|1": the mechanism the rank's greeting names ("N bytes" when the rank
# closed before it: libzmq does at a peer of another mechanism), and whether the stranger got
# through ZMTP's handshake, and so reached libzmq's messages.
import socket, struct, sys, time

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
plain = sys.argv[4:7] if len(sys.argv) >= 7 and sys.argv[4] == "PLAIN" else None


def recv_exact(s, k, partial=False):
    got = b''
    while len(got) < k:
        try:
            d = s.recv(k - len(got))
        except OSError:
            d = b''
        if not d:
            return got if partial else None
        got += d
    return got


def prop(k, v):
    return bytes([len(k)]) + k + struct.pack('>I', len(v)) + v


def command(body):
    return bytes([4, len(body)]) + body


def read_command(s):
    """The name of the next command (short commands only), or None if the rank closed."""
    head = recv_exact(s, 2)
    if not head or head[0] != 4:
        return None
    body = recv_exact(s, head[1])
    return body[1:1 + body[0]] if body else None


s = socket.create_connection((host, port), timeout=5)
mech = b'PLAIN' if plain else b'NULL'
s.sendall(b'\xff' + b'\x00' * 8 + b'\x7f' + bytes([3, 1]) + mech.ljust(20, b'\x00') + b'\x00' * 32)
greet = recv_exact(s, 64, partial=True)
said = greet[12:32].rstrip(b'\x00').decode('ascii', 'replace') if len(greet) >= 32 else '%d bytes' % len(greet)
meta = prop(b'Socket-Type', b'DEALER') + prop(b'Identity', b'')
passed = 0
try:
    if len(greet) == 64 and plain:
        user, password = plain[1].encode(), plain[2].encode()
        s.sendall(command(b'\x05HELLO' + bytes([len(user)]) + user + bytes([len(password)]) + password))
        if read_command(s) == b'WELCOME':
            s.sendall(command(b'\x08INITIATE' + meta))
            passed = int(read_command(s) == b'READY')
    elif len(greet) == 64:
        s.sendall(command(b'\x05READY' + meta))
        passed = int(read_command(s) == b'READY')
except OSError:
    pass
if passed and n > 0:
    time.sleep(0.2)
    try:
        s.sendall(b'\x00\x01x' * n + command(b'\x04PING' + struct.pack('>H', 0) + b'ctx'))
    except OSError:
        pass
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
s.close()
print("mechanism=%s passed=%d" % (said, passed))
