"""HTTP/2 servers for crates/http/tests/h2_interop.rs, written with python3-h2.

Usage: hostile.py MODE PORT. Prints "ready" once listening, then after each
connection ends "total REQUESTS ANSWERED" (cumulative): requests whose
headers arrived, and those answered with a response.

Modes (each answers GET with 200 and "ok", POST with its body's length):
  plain        nothing odd
  goaway       GOAWAY with last-stream-id = the 50th request's stream, then close
  rst          RST_STREAM REFUSED_STREAM instead of every 10th response
  window       SETTINGS_INITIAL_WINDOW_SIZE 1: request bodies arrive a byte per window update
  maxstreams   SETTINGS_MAX_CONCURRENT_STREAMS 1, raised to 10 after 20 requests
  tableupdate  indexed response fields; table size update to 0 after 10 responses, back to 4096 after 20
  continuation a 40 kB response field: the header block spans CONTINUATION frames
  pingflood    100 PINGs before every response
  garbage      a PING frame of 7 bytes on the first request (a FRAME_SIZE_ERROR)
  nostreams    SETTINGS_MAX_CONCURRENT_STREAMS 0, never raised
  noack        never acknowledges the client's SETTINGS (answers requests all the same)
"""

import socket
import sys

SETTINGS_ACK = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"

import h2.config
import h2.connection
import h2.events
import h2.settings
from h2.errors import ErrorCodes

MODE = sys.argv[1]
PORT = int(sys.argv[2])
requests = 0
answered = 0


def respond(conn, sid, body_len, post):
    global answered
    body = str(body_len).encode() if post else b"ok"
    headers = [(":status", "200"), ("content-length", str(len(body)))]
    if MODE == "tableupdate":
        headers += [("server", "hostile"), ("x-n", str(answered % 3))]
    if MODE == "continuation":
        headers.append(("x-big", "v" * 40000))
    if MODE == "pingflood":
        for i in range(100):
            conn.ping(i.to_bytes(8, "big"))
    conn.send_headers(sid, headers)
    conn.send_data(sid, body, end_stream=True)
    answered += 1


def send(sock, conn):
    out = conn.data_to_send()
    if MODE == "noack":
        # python-h2 acknowledges SETTINGS by itself: take the ACK out.
        out = out.replace(SETTINGS_ACK, b"")
    sock.sendall(out)


def serve(sock):
    global requests, answered
    settings = {}
    if MODE == "window":
        settings[h2.settings.SettingCodes.INITIAL_WINDOW_SIZE] = 1
    if MODE == "maxstreams":
        settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = 1
    if MODE == "nostreams":
        settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = 0
    conn = h2.connection.H2Connection(
        config=h2.config.H2Configuration(client_side=False, header_encoding=None)
    )
    conn.local_settings = h2.settings.Settings(client=False, initial_values=settings)
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    streams = {}
    closing = None
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            break
        if not data:
            break
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                requests += 1
                method = dict(ev.headers)[b":method"]
                streams[ev.stream_id] = [0, method == b"POST", requests]
                if MODE == "garbage":
                    sock.sendall(b"\x00\x00\x07\x06\x00\x00\x00\x00\x00" + b"1234567")
                if MODE == "goaway" and requests == 50 and closing is None:
                    # Written raw so that the streams at or below it can
                    # still be answered (python-h2 sends nothing after its own GOAWAY).
                    closing = ev.stream_id
                    sock.sendall(conn.data_to_send())
                    goaway = closing.to_bytes(4, "big") + (0).to_bytes(4, "big")
                    sock.sendall(b"\x00\x00\x08\x07\x00\x00\x00\x00\x00" + goaway)
                if MODE == "maxstreams" and requests == 20:
                    conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 10})
            elif isinstance(ev, h2.events.DataReceived):
                streams[ev.stream_id][0] += len(ev.data)
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                sid = ev.stream_id
                body_len, post, ordinal = streams.pop(sid)
                if closing is not None and sid > closing:
                    continue
                if MODE == "rst" and ordinal % 10 == 0:
                    conn.reset_stream(sid, ErrorCodes.REFUSED_STREAM)
                    continue
                if MODE == "tableupdate" and answered == 10:
                    conn.encoder.header_table_size = 0
                if MODE == "tableupdate" and answered == 20:
                    conn.encoder.header_table_size = 4096
                respond(conn, sid, body_len, post)
        send(sock, conn)
        if closing is not None and not any(s <= closing for s in streams):
            # Every stream at or below last-stream-id is answered.
            break
    # A FIN, not a reset that could discard the last responses: drain first.
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(2)
        while sock.recv(65536):
            pass
    except OSError:
        pass
    sock.close()
    print(f"total {requests} {answered}", flush=True)


def main():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", PORT))
    srv.listen(16)
    print("ready", flush=True)
    while True:
        sock, _ = srv.accept()
        try:
            serve(sock)
        except Exception as e:  # a client error ends that connection only
            print(f"error {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            sock.close()
            print(f"total {requests} {answered}", flush=True)


main()
