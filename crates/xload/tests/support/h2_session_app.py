"""An h2c session application for crates/xload/tests/h2.rs, written with
python3-h2: the HTTP/2 side of what `xload serve --app banking` checks over
HTTP/1.1 (a cookie set at login, ids captured from the login's header and
body, echoed by every later request of the session).

Usage: h2_session_app.py PORT. Prints "ready" once listening, then after
each connection ends "total REQUESTS LOGINS CHECKED MISMATCHES" (cumulative).

  GET /login          a new session N: Set-Cookie sid=N, X-Token tN-SECRET,
                      body {"user": {"id": "uN"}}
  GET /account/ID     200 "balance ok" when the request carries cookie sid=N,
                      X-Token tN-SECRET and ID uN of one session (CHECKED),
                      else 403 (a MISMATCH)
"""

import json
import random
import selectors
import socket
import sys

import h2.config
import h2.connection
import h2.events
import h2.exceptions

PORT = int(sys.argv[1])
sessions = {}
totals = {"requests": 0, "logins": 0, "checked": 0, "mismatches": 0}


def cookie_sid(fields):
    for name, value in fields:
        if name != b"cookie":
            continue
        for pair in value.split(b";"):
            k, _, v = pair.strip().partition(b"=")
            if k == b"sid":
                return v.decode()
    return None


def answer(fields):
    """(status, extra headers, body) for one request."""
    totals["requests"] += 1
    path = dict(fields).get(b":path", b"").decode()
    if path == "/login":
        totals["logins"] += 1
        n = str(totals["logins"])
        token = "t%s-%08x" % (n, random.getrandbits(32))
        sessions[n] = (token, "u" + n)
        body = json.dumps({"user": {"id": "u" + n}}).encode()
        extra = [("set-cookie", "sid=%s; Path=/" % n), ("x-token", token)]
        return 200, extra, body
    if path.startswith("/account/"):
        s = sessions.get(cookie_sid(fields))
        token = dict(fields).get(b"x-token", b"").decode()
        if s is not None and token == s[0] and path[len("/account/"):] == s[1]:
            totals["checked"] += 1
            return 200, [], b"balance ok"
        totals["mismatches"] += 1
        return 403, [], b"not your session"
    return 404, [], b"no such page"


def on_readable(sel, sock, conn):
    try:
        data = sock.recv(65536)
        for event in conn.receive_data(data) if data else ():
            if isinstance(event, h2.events.RequestReceived):
                status, extra, body = answer(event.headers)
                headers = [(":status", str(status)), ("content-length", str(len(body)))]
                conn.send_headers(event.stream_id, headers + extra)
                conn.send_data(event.stream_id, body, end_stream=True)
        sock.sendall(conn.data_to_send())
    except (OSError, h2.exceptions.H2Error):
        # A client gone (the preflight's probe connection) or broken.
        data = b""
    if not data:
        sel.unregister(sock)
        sock.close()
        print("total %(requests)d %(logins)d %(checked)d %(mismatches)d" % totals, flush=True)


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", PORT))
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            if key.data is None:
                sock, _ = listener.accept()
                conn = h2.connection.H2Connection(
                    config=h2.config.H2Configuration(client_side=False, header_encoding=None)
                )
                conn.initiate_connection()
                sock.sendall(conn.data_to_send())
                sel.register(sock, selectors.EVENT_READ, conn)
            else:
                on_readable(sel, key.fileobj, key.data)


main()
