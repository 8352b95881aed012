#!/usr/bin/env python3
"""A fake integrator token server for the ExchangerTests (standard library only).

Binds 127.0.0.1 on a free port, prints the port on stdout (one line), then serves until its
stdin closes (the test process exited) or a hard timeout passes, whichever comes first, so no
server outlives the tests. Routes, by path (any method):

  /ok             Alipay envelope alipay_system_oauth_token_response.{user_id, access_token,
                  expires_in, mc_user_id}; mc_user_id echoes the request's mc_uid
  /ok-flat        flat snake_case {user_id, access_token, expires_in}
  /ok-flat-camel  flat camelCase {userId, accessToken, expiresIn, mcUserId}
  /slow           sleeps `delay` seconds (default 3) before answering like /ok; its arrival is
                  signalled under its `echo_id` parameter
  /arrived        waits (at most `wait` s, default 10) until a /slow request with ?id=<echo_id>
                  arrived: lets a test cancel a request the server is known to hold
  /500            status 500 whose body repeats the auth code and a token
  /badjson        status 200, a body that is not JSON (and repeats the auth code)
  /missing        the envelope without the field named by `drop` (default user_id)
  /huge           status 200, `mb` MB (default 4); with chunked=1 no Content-Length is sent
  /mismatch       the envelope with a different mc_user_id
  /rejected       Alipay's error_response (the code was already used)
  /unauthorized   status 401 with `WWW-Authenticate: <challenge>` (default
                  `Basic realm="integrator"`, the realm RFC 7617 requires) and a JSON error: a
                  server that refuses the app's credentials
  /echo           answers like /ok and records the request under its `echo_id` parameter
  /record         returns the recorded request for ?id=<echo_id> as JSON
  /redirect       answers `status` (default 302) with `Location: <to>` and a body holding a
                  token-shaped reply: a token endpoint that redirects elsewhere
  /log            every request this server received (but /log itself) as {"requests": [...]},
                  each with method, path, query, body and headers: lets a test prove a second
                  server instance was never contacted

Reply shaping parameters (query, form or JSON body): expires_as=number|string|none.
"""

import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "SERVER-ACCESS-TOKEN-5f3c9a1e"
USER_ID = "2088000000000001"
HARD_TIMEOUT = float(os.environ.get("TOKEN_SERVER_TIMEOUT", "300"))

RECORDS = {}
ARRIVALS = {}
LOG = []
RECORDS_LOCK = threading.Lock()


def arrival(echo_id):
    with RECORDS_LOCK:
        return ARRIVALS.setdefault(echo_id, threading.Event())


def parse_params(handler, body):
    parsed = urllib.parse.urlsplit(handler.path)
    params = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
    ctype = handler.headers.get("Content-Type", "")
    if body:
        if ctype.startswith("application/x-www-form-urlencoded"):
            params.update(urllib.parse.parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        elif ctype.startswith("application/json"):
            try:
                value = json.loads(body.decode("utf-8"))
                if isinstance(value, dict):
                    params.update({k: str(v) for k, v in value.items()})
            except ValueError:
                pass
    return parsed.path, parsed.query, params


def expires(params):
    mode = params.get("expires_as", "number")
    if mode == "string":
        return "1296000"
    if mode == "none":
        return None
    return 1296000


def envelope(params, mc_user_id=None, drop=None):
    inner = {"user_id": USER_ID, "access_token": TOKEN, "re_expires_in": 2592000}
    value = expires(params)
    if value is not None:
        inner["expires_in"] = value
    mc = mc_user_id if mc_user_id is not None else params.get("mc_uid")
    if mc is not None:
        inner["mc_user_id"] = mc
    if drop:
        inner.pop(drop, None)
    return {"alipay_system_oauth_token_response": inner, "sign": "c2lnbmF0dXJl"}


class Handler(BaseHTTPRequestHandler):
    server_version = "TokenServer/1"

    def log_message(self, *args):  # keep the test output quiet
        pass

    def send_json(self, status, value):
        self.send_bytes(status, json.dumps(value).encode("utf-8"), "application/json")

    def send_bytes(self, status, data, ctype, extra_headers=()):
        try:
            self.send_response(status)
            for name, value in extra_headers:
                self.send_header(name, value)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        path, query, params = parse_params(self, body)
        code = params.get("auth_code", params.get("code", ""))
        if path != "/log":
            with RECORDS_LOCK:
                LOG.append({
                    "method": self.command,
                    "path": path,
                    "query": query,
                    "body": body.decode("utf-8", "replace"),
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                })

        if path == "/ok" or path == "/echo":
            if path == "/echo":
                record = {
                    "method": self.command,
                    "query": query,
                    "content_type": self.headers.get("Content-Type"),
                    "body": body.decode("utf-8", "replace"),
                    "params": params,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                }
                with RECORDS_LOCK:
                    RECORDS[params.get("echo_id", "")] = record
            self.send_json(200, envelope(params))
        elif path == "/ok-flat":
            reply = {"user_id": USER_ID, "access_token": TOKEN}
            if expires(params) is not None:
                reply["expires_in"] = expires(params)
            self.send_json(200, reply)
        elif path == "/ok-flat-camel":
            reply = {"userId": USER_ID, "accessToken": TOKEN, "mcUserId": params.get("mc_uid")}
            if expires(params) is not None:
                reply["expiresIn"] = expires(params)
            self.send_json(200, reply)
        elif path == "/slow":
            arrival(params.get("echo_id", "")).set()
            time.sleep(float(params.get("delay", "3")))
            self.send_json(200, envelope(params))
        elif path == "/500":
            self.send_json(500, {"error": "boom", "auth_code": code, "access_token": TOKEN})
        elif path == "/badjson":
            text = "<html>upstream error for auth_code=%s</html>" % code
            self.send_bytes(200, text.encode("utf-8"), "text/html")
        elif path == "/missing":
            self.send_json(200, envelope(params, drop=params.get("drop", "user_id")))
        elif path == "/mismatch":
            self.send_json(200, envelope(params, mc_user_id="someone-else"))
        elif path == "/rejected":
            self.send_json(200, {"error_response": {
                "code": "40002", "msg": "Invalid Arguments",
                "sub_code": "isv.code-invalid", "sub_msg": "auth_code %s used" % code}})
        elif path == "/unauthorized":
            data = json.dumps({"error": "unauthorized"}).encode("utf-8")
            self.send_bytes(
                401, data, "application/json",
                extra_headers=[("WWW-Authenticate",
                                params.get("challenge", 'Basic realm="integrator"'))])
        elif path == "/authorization-required":
            # The refresh endpoint's "the user must authorize" (HTTPTokenRefresher).
            self.send_json(401, {"error": "authorization_required",
                                 "error_description": "the refresh family ended"})
        elif path == "/busy":
            data = json.dumps({"error": "temporarily_unavailable",
                               "token": params.get("rejected_access_token", "")}).encode("utf-8")
            self.send_bytes(503, data, "application/json",
                            extra_headers=[("Retry-After", params.get("retry_after", "7"))])
        elif path == "/refused":
            self.send_json(403, {"error": "refresh_refused"})
        elif path == "/redirect":
            status = int(params.get("status", "302"))
            data = json.dumps(envelope(params)).encode("utf-8")
            self.send_bytes(
                status, data, "application/json",
                extra_headers=[("Location", params.get("to", "/ok"))])
        elif path == "/log":
            with RECORDS_LOCK:
                requests = list(LOG)
            self.send_json(200, {"requests": requests})
        elif path == "/huge":
            self.send_huge(int(params.get("mb", "4")), params.get("chunked") == "1")
        elif path == "/arrived":
            seen = arrival(params.get("id", "")).wait(float(params.get("wait", "10")))
            self.send_json(200 if seen else 404, {"arrived": seen})
        elif path == "/record":
            with RECORDS_LOCK:
                record = RECORDS.get(params.get("id", ""))
            self.send_json(200 if record else 404, record or {})
        else:
            self.send_json(404, {"error": "no route " + path})

    def send_huge(self, megabytes, unsized):
        chunk = b'{"pad":"' + b"x" * (64 * 1024 - 10) + b'"}'
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if not unsized:
                self.send_header("Content-Length", str(len(chunk) * 16 * megabytes))
            self.send_header("Connection", "close")
            self.end_headers()
            for _ in range(16 * megabytes):
                self.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    do_GET = handle_any
    do_POST = handle_any
    do_PUT = handle_any


def watch_stdin():
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except Exception:
        pass
    os._exit(0)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # The default backlog is 5, and the test targets run their tests in parallel against this
    # one server: as the rotating token server does, room for every connection a loaded
    # machine has not accepted yet.
    request_queue_size = 128


def main():
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=watch_stdin, daemon=True).start()
    timer = threading.Timer(HARD_TIMEOUT, lambda: os._exit(0))
    timer.daemon = True
    timer.start()
    sys.stdout.write("%d\n" % server.server_address[1])
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
