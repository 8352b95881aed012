#!/usr/bin/env python3
"""A fake OAuth 2 token endpoint that ROTATES refresh tokens (standard library only).

SIMULATED INTEGRATOR SERVER: it stands in for the integrator's token endpoint in the
MultiProcessTests; it talks to no real Alipay and its tokens are fakes.

Binds 127.0.0.1 on a free port, prints the port on stdout (one line), then serves until its
stdin closes (the test process exited) or a hard timeout passes (ROTATING_TOKEN_SERVER_TIMEOUT
seconds, default 300), whichever comes first, so no server outlives the tests.

Routes:

  POST /token    form-encoded, like RFC 6749:
                 grant_type=client_credentials (or authorization_code): a new token family
                   -> 200 {access_token, refresh_token, token_type: "Bearer", expires_in, user_id}
                 grant_type=refresh_token&refresh_token=R:
                   R is the current refresh token of a live family -> a new access and refresh
                     token; R is spent
                   R was already spent -> REUSE: the whole family is revoked (a stolen token is
                     assumed, as real servers do), 400 {"error": "invalid_grant"}
                   R unknown, or its family revoked -> 400 {"error": "invalid_grant"}
                 The request waits `delay` seconds first (see /config). When the client hangs up
                 during the delay (its socket reads end of file), nothing rotates and the
                 request counts as `aborted`: that models a holder killed mid-request.
                 After the grant (the tokens have rotated), the answer waits `reply_delay` seconds
                 (see /config): a server that rotated and is slow to say so. A client that hangs
                 up then has lost the new tokens.
                 A request may carry `X-Worker-Pid`; /stats lists the requests in flight with it.
  POST /revoke   RFC 7009: form `token=T&token_type_hint=H`, with the same client
                 authentication as /token (a refusal is 401 invalid_client). Waits
                 `revoke_delay` s, then answers `revoke_status` (default 200, an empty body):
                 with 200, a refresh token's family is revoked, an access token is revoked; an
                 unknown token is no error (RFC 7009 §2.2). Each request is recorded in /stats
                 `revocations` ({token, hint, auth, status}; status 0 while in flight or when the
                 client hung up).
  GET /stats     JSON counts: grants (successful, by grant type), refreshes, issued (every
                 successful grant), requests (by grant type), reuses, revoked_families,
                 invalid_grants, aborted, in_flight, families, and in_flight_requests: each
                 request the server holds, {pid (its X-Worker-Pid, or 0), age_ms};
                 answered_by_pid: token requests answered (a grant or a refusal), by
                 X-Worker-Pid ("0" without one); version: a count of the server's state
                 changes. `?after=V&wait_ms=T` waits (at most T ms, 60 s at most) until the
                 version passes V: a test waits for a change instead of polling.
  GET /config?delay=<s>&expires_in=<s>
                 sets the delay before answering token requests (default 0) and the expires_in
                 of new tokens (default 3600); answers the configuration.
  GET /reuses    {"now": the server's time.monotonic(), "reuses": [...]}: one entry per reuse, in
                 order: {family, token, first_pid, first_arrived, reuse_pid, reuse_arrived} (the
                 X-Worker-Pid of the request that spent the token first and of the one that
                 presented it again, or 0; when each arrived, after its body was read, on
                 time.monotonic(): CLOCK_MONOTONIC on Linux).
  GET /.well-known/...
                 the authorization server's metadata (RFC 8414, OpenID Connect discovery): at
                 each path of `metadata_paths` (space-separated; default
                 /.well-known/oauth-authorization-server), 200 with `metadata`, a JSON text
                 whose every `{base}` becomes this server's http://127.0.0.1:<port>; 404 at any
                 other /.well-known/ path, and everywhere while `metadata` is empty. The next
                 `metadata_fail_count` metadata requests are answered `metadata_fail_status`
                 (default 503; 0 drops the connection). Each path asked is listed in /stats
                 `metadata_requests`.
  GET /introspect?token=<access token>
                 {"active": bool}: issued, not revoked, and its family not revoked.

A protected resource, for the bearer-client tests:

  GET /resource  with `Authorization: Bearer <access token>`: 200 {"ok": true, "family": N} when
                 the token is active; otherwise 401 with
                 `WWW-Authenticate: <resource_challenge>` (below). Waits `resource_delay` s first.
                 A request without an `Authorization` header counts as `resource_no_token`.
  GET /redirect?to=<url>&status=<code>
                 answers `status` (default 302) with `Location: <url>` (absolute or relative): an
                 API that moved a resource, for the bearer client's redirect tests. Counted in
                 `redirects`.
  GET /revoke-access
                 revokes every access token issued so far (their refresh tokens stay valid, as
                 when a resource server's key rotates); answers {"revoked": n}.

Client authentication and scripted failures (all set through /config, all off by default):

  client_id, client_secret
                 when both are set, POST /token requires them, either as HTTP Basic
                 (`Authorization: Basic base64(id:secret)`, form-urlencoded per RFC 6749 2.3.1) or
                 as `client_id` and `client_secret` form fields; otherwise 401
                 {"error": "invalid_client"} with `WWW-Authenticate: <token_challenge>`, by
                 default `Basic realm="rotating-token-server"` (RFC 7617 requires the realm;
                 set it to any header value, several challenges included). /stats counts
                 `client_auth` by method ("basic", "post", "none", "assertion").
  client_assertion
                 when set, the client must authenticate with a client assertion (RFC 7521 4.2):
                 `client_assertion_type` the JWT-bearer URN and a `client_assertion` that starts
                 with this value and was never presented before (a replay is refused), with
                 the configured `client_id` when one is set; anything else is 401
                 {"error": "invalid_client"}. Every assertion received is listed in /stats
                 `assertions`.
  resource_challenge
                 the `WWW-Authenticate` of /resource's 401, by default
                 `Bearer realm="rotating-token-server", error="invalid_token"`.
  fail_count, fail_status, fail_body
                 the next `fail_count` token requests are answered `fail_status` with the raw
                 `fail_body` (JSON or not) instead of a grant; nothing rotates. A
                 `fail_status` of 0 drops the connection instead: no status line, the socket
                 closes; one of -1 resets it (SO_LINGER 0, then close: the client reads a
                 reset, not an end of file).
  fail_retry_after
                 the `Retry-After` header of those answers (seconds or an HTTP-date); none
                 when empty.
  redirect_to    token requests are answered 307 with `Location: <redirect_to>`.
  huge_reply     token requests are answered 200 with a JSON body of this many bytes.
  revoke_access_after
                 once /resource has answered this many 200s, the server does what
                 /revoke-access does, at once and by itself: a revocation that lands while
                 requests are in flight, whatever the speed of the client (0: off).
  reset_reused   when 1, a token request that arrives on a connection that already carried a
                 request is not answered: the connection is reset (SO_LINGER 0, then close), as
                 when a server or a load balancer drops an idle keep-alive connection just as the
                 client reuses it. Counted in `reused_resets`.

Every token request's form is listed in /stats `token_forms`: {grant_type, scope, audience (each
null when absent), resource (every `resource` it carried)}.

Every token request is also counted by how its connection and body arrived: `token_posts`
(every POST /token), `reused_token_posts` (those that came on a connection that had carried a
request before), and `incomplete_bodies` (those whose body did not arrive in full: the client hung up
first, or 30 s passed after the headers; a client that sent the headers of a POST and not its
body, as a platform that replays a request without its body does, waits for an answer until its
own timeout; the connection is closed unanswered).
"""

import base64
import json
import os
import secrets
import select
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HARD_TIMEOUT = float(os.environ.get("ROTATING_TOKEN_SERVER_TIMEOUT", "300"))

class StateLock:
    """The lock of the server's state. Leaving a `with LOCK:` block counts a change (`version`)
    and wakes the /stats requests that wait for one, so a test waits for an event, never polls.
    A block that only reads takes `LOCK.reading` (no change counted)."""

    def __init__(self):
        self.condition = threading.Condition(threading.Lock())
        self.version = 0
        self.reading = self.condition

    def __enter__(self):
        self.condition.acquire()
        return self

    def __exit__(self, *exception):
        self.version += 1
        self.condition.notify_all()
        self.condition.release()
        return False


LOCK = StateLock()
CONFIG = {
    "delay": 0.0,
    "reply_delay": 0.0,
    "expires_in": 3600,
    "resource_delay": 0.0,
    "client_id": "",
    "client_secret": "",
    "fail_count": 0,
    "fail_status": 503,
    "fail_body": "",
    "fail_retry_after": "",
    "redirect_to": "",
    "huge_reply": 0,
    "revoke_access_after": 0,
    # When set (space-separated), a new family is granted only these of the scopes it asked for
    # (RFC 6749 §3.3: the server may narrow a grant); a refresh asking for a scope beyond the
    # family's grant is refused with invalid_scope (§6), as Authlib does.
    "grantable_scope": "",
    "reset_reused": 0,
    "client_assertion": "",
    "revoke_status": 200,
    "revoke_delay": 0.0,
    "metadata": "",
    "metadata_paths": "/.well-known/oauth-authorization-server",
    "metadata_fail_count": 0,
    "metadata_fail_status": 503,
    "token_challenge": 'Basic realm="rotating-token-server"',
    "resource_challenge": 'Bearer realm="rotating-token-server", error="invalid_token"',
}
STATS = {
    "grants": {},
    "requests": {},
    "refreshes": 0,
    "issued": 0,
    "reuses": 0,
    "revoked_families": 0,
    "invalid_grants": 0,
    "aborted": 0,
    "in_flight": 0,
    "families": 0,
    "client_auth": {},
    "invalid_clients": 0,
    "scripted_failures": 0,
    "resource_ok": 0,
    "resource_unauthorized": 0,
    "access_revocations": 0,
    "resource_no_token": 0,
    "redirects": 0,
    "token_posts": 0,
    "reused_token_posts": 0,
    "reused_resets": 0,
    "incomplete_bodies": 0,
    "invalid_scopes": 0,
    "refresh_scopes": {},
    "assertions": [],
    "revocations": [],
    "metadata_requests": [],
    "token_forms": [],
    "answered_by_pid": {},
}
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
IN_FLIGHT = {}  # request number -> (pid header, monotonic arrival time)
FAMILIES = {}  # family id -> {"revoked": bool, "current": refresh token}
REFRESH_TOKENS = {}  # refresh token -> family id (current or spent)
SPENT_BY = {}  # spent refresh token -> (pid header, monotonic arrival) of the request that spent it
REUSES = []  # one dict per reuse, for GET /reuses
ACCESS_TOKENS = {}  # access token -> family id
REVOKED_ACCESS = set()  # access tokens revoked by /revoke-access
NEXT = {"family": 0, "request": 0}


def issue(family):
    """New tokens for `family` (LOCK held). Returns the reply body."""
    scope = FAMILIES[family].get("scope")
    reply = issue_tokens(family)
    if scope is not None:
        reply["scope"] = " ".join(sorted(scope))
    return reply


def issue_tokens(family):
    access = "at-%d-%s" % (family, secrets.token_hex(8))
    refresh = "rt-%d-%s" % (family, secrets.token_hex(8))
    FAMILIES[family]["current"] = refresh
    REFRESH_TOKENS[refresh] = family
    ACCESS_TOKENS[access] = family
    STATS["issued"] += 1
    return {
        "access_token": access,
        "refresh_token": refresh,
        "token_type": "Bearer",
        "expires_in": CONFIG["expires_in"],
        "user_id": "2088%012d" % family,
    }


def is_active(token):
    """Whether `token` is an issued access token, not revoked, of a live family (LOCK held)."""
    family = ACCESS_TOKENS.get(token)
    return family is not None and not FAMILIES[family]["revoked"] and token not in REVOKED_ACCESS


def count(table, name):
    STATS[table][name] = STATS[table].get(name, 0) + 1


def client_authentication(headers, params):
    """Checks the client's credentials (LOCK held). Returns (method, None or an error reply)."""
    header = headers.get("Authorization", "")
    method, client_id, secret = "none", params.get("client_id", ""), None
    if header.startswith("Basic "):
        method = "basic"
        try:
            decoded = base64.b64decode(header[6:], validate=True).decode("utf-8")
            user, _, password = decoded.partition(":")
            client_id = urllib.parse.unquote_plus(user)
            secret = urllib.parse.unquote_plus(password)
        except Exception:
            client_id, secret = "", None
    elif "client_assertion" in params or "client_assertion_type" in params:
        method = "assertion"
    elif "client_secret" in params:
        method, secret = "post", params["client_secret"]
    count("client_auth", method)
    expected = CONFIG["client_assertion"]
    if method == "assertion":
        value = params.get("client_assertion", "")
        seen = value in STATS["assertions"]
        STATS["assertions"].append(value)
        if (expected and params.get("client_assertion_type") == JWT_BEARER
                and value.startswith(expected) and not seen
                and (not CONFIG["client_id"] or client_id == CONFIG["client_id"])):
            return method, None
        STATS["invalid_clients"] += 1
        return method, (401, {"error": "invalid_client",
                              "error_description": "client assertion refused"})
    if expected:
        STATS["invalid_clients"] += 1
        return method, (401, {"error": "invalid_client",
                              "error_description": "a client assertion is required"})
    if not CONFIG["client_id"] or not CONFIG["client_secret"]:
        return method, None
    if client_id == CONFIG["client_id"] and secret == CONFIG["client_secret"]:
        return method, None
    STATS["invalid_clients"] += 1
    return method, (401, {"error": "invalid_client",
                          "error_description": "client authentication failed"})


def revoke(token):
    """RFC 7009 2.1: revokes `token` (LOCK held): a refresh token's family, or an access token."""
    family = REFRESH_TOKENS.get(token)
    if family is not None:
        FAMILIES[family]["revoked"] = True
    elif token in ACCESS_TOKENS:
        REVOKED_ACCESS.add(token)


def grant(params, caller=("", 0.0)):
    """Runs one grant (LOCK held) for `caller` (its pid header, its monotonic arrival).

    Returns (status, body)."""
    grant_type = params.get("grant_type", "")
    count("requests", grant_type or "missing")
    if grant_type in ("client_credentials", "authorization_code"):
        NEXT["family"] += 1
        family = NEXT["family"]
        FAMILIES[family] = {"revoked": False, "current": None}
        if "scope" in params:
            asked = set(params["scope"].split())
            grantable = set(CONFIG["grantable_scope"].split())
            FAMILIES[family]["scope"] = asked & grantable if grantable else asked
        STATS["families"] += 1
        count("grants", grant_type)
        return 200, issue(family)
    if grant_type == "refresh_token":
        token = params.get("refresh_token", "")
        family = REFRESH_TOKENS.get(token)
        if family is None or FAMILIES[family]["revoked"]:
            STATS["invalid_grants"] += 1
            return 400, {"error": "invalid_grant"}
        if FAMILIES[family]["current"] != token:
            # A spent refresh token came back: revoke the whole family.
            STATS["reuses"] += 1
            first_pid, first_arrived = SPENT_BY.get(token, ("", 0.0))
            REUSES.append({
                "family": family,
                "token": token,
                "first_pid": int(first_pid) if first_pid.isdigit() else 0,
                "first_arrived": first_arrived,
                "reuse_pid": int(caller[0]) if caller[0].isdigit() else 0,
                "reuse_arrived": caller[1]})
            STATS["revoked_families"] += 1
            STATS["invalid_grants"] += 1
            FAMILIES[family]["revoked"] = True
            return 400, {"error": "invalid_grant", "error_description": "refresh token reused"}
        count("refresh_scopes", params["scope"] if "scope" in params else "(omitted)")
        granted = FAMILIES[family].get("scope")
        if "scope" in params and granted is not None and not set(params["scope"].split()) <= granted:
            # RFC 6749 §6: a refresh may not ask for a scope the original grant did not include.
            STATS["invalid_scopes"] += 1
            return 400, {"error": "invalid_scope",
                         "error_description": "scope exceeds the original grant"}
        STATS["refreshes"] += 1
        SPENT_BY[token] = caller
        count("grants", grant_type)
        return 200, issue(family)
    return 400, {"error": "unsupported_grant_type"}


class Handler(BaseHTTPRequestHandler):
    server_version = "RotatingTokenServer/1"
    protocol_version = "HTTP/1.1"

    # How long a request's body may take to arrive after its headers: longer than the tests'
    # request timeouts, so a client that never sends the body waits out its own timeout.
    BODY_TIMEOUT = 30.0

    def setup(self):
        super().setup()
        self.requests_on_connection = 0  # requests this connection carried before this one

    def handle_one_request(self):
        super().handle_one_request()
        self.requests_on_connection += 1

    def log_message(self, *args):  # keep the test output quiet
        pass

    def reset_connection(self):
        """Resets the connection (RST, not FIN) and ends this handler without an answer."""
        try:
            self.connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass
        self.close_connection = True

    def read_body(self, length):
        """The request's body, or None when it did not arrive in full within BODY_TIMEOUT."""
        if length <= 0:
            return b""
        try:
            self.connection.settimeout(self.BODY_TIMEOUT)
            body = self.rfile.read(length)
        except OSError:  # socket.timeout included
            body = None
        finally:
            try:
                self.connection.settimeout(None)
            except OSError:
                pass
        return body if body is not None and len(body) == length else None

    def send_json(self, status, value):
        data = json.dumps(value).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def client_hung_up(self):
        """Whether the client closed its end (end of file, or reset)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def wait_delay(self, delay):
        """Sleeps `delay` s in small steps. Returns False when the client hung up meanwhile."""
        deadline = time.monotonic() + delay
        while True:
            if self.client_hung_up():
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(0.005, left))

    def do_GET(self):
        parsed = urllib.parse.urlsplit(self.path)
        params = dict(urllib.parse.parse_qsl(parsed.query, keep_blank_values=True))
        if parsed.path == "/stats":
            after = int(params.get("after", "-1"))
            wait = min(float(params.get("wait_ms", "0")), 60_000) / 1000
            with LOCK.reading:
                # A long poll: wait (at most `wait_ms`) until the state changed past `after`.
                LOCK.condition.wait_for(lambda: LOCK.version > after, timeout=wait)
                value = json.loads(json.dumps(STATS))
                value["version"] = LOCK.version
                now = time.monotonic()
                value["in_flight_requests"] = [
                    {"pid": int(pid) if pid.isdigit() else 0,
                     "age_ms": round((now - arrived) * 1000, 1)}
                    for pid, arrived in IN_FLIGHT.values()]
            self.send_json(200, value)
        elif parsed.path == "/config":
            with LOCK:
                for name, value in params.items():
                    if name not in CONFIG:
                        continue
                    kind = type(CONFIG[name])
                    CONFIG[name] = kind(float(value)) if kind in (int, float) else value
                value = dict(CONFIG)
                value.pop("client_secret")
            self.send_json(200, value)
        elif parsed.path == "/reuses":
            with LOCK:
                value = {"now": time.monotonic(), "reuses": list(REUSES)}
            self.send_json(200, value)
        elif parsed.path == "/introspect":
            with LOCK:
                active = is_active(params.get("token", ""))
            self.send_json(200, {"active": active})
        elif parsed.path.startswith("/.well-known/") or "/.well-known/" in parsed.path:
            self.metadata(parsed.path)
        elif parsed.path == "/resource":
            self.resource()
        elif parsed.path == "/redirect":
            with LOCK:
                STATS["redirects"] += 1
            status = int(params.get("status", "302"))
            self.send_raw(status, [("Location", params.get("to", "/resource"))], b"")
        elif parsed.path == "/revoke-access":
            with LOCK:
                fresh = [token for token in ACCESS_TOKENS if token not in REVOKED_ACCESS]
                REVOKED_ACCESS.update(fresh)
                STATS["access_revocations"] += 1
            self.send_json(200, {"revoked": len(fresh)})
        else:
            self.send_json(404, {"error": "no route " + parsed.path})

    def metadata(self, path):
        """Answers a metadata request (GET .../.well-known/...)."""
        with LOCK:
            STATS["metadata_requests"].append(path)
            failing = CONFIG["metadata_fail_count"] > 0
            if failing:
                CONFIG["metadata_fail_count"] -= 1
            status = CONFIG["metadata_fail_status"]
            document, paths = CONFIG["metadata"], CONFIG["metadata_paths"].split()
        if failing and status == 0:
            self.close_connection = True
            return
        if failing:
            self.send_raw(status, [], b"")
        elif document and path in paths:
            base = "http://127.0.0.1:%d" % self.server.server_address[1]
            data = document.replace("{base}", base).encode("utf-8")
            self.send_raw(200, [("Content-Type", "application/json")], data)
        else:
            self.send_json(404, {"error": "no metadata at " + path})

    def resource(self):
        header = self.headers.get("Authorization", "")
        token = header[7:] if header.startswith("Bearer ") else ""
        with LOCK:
            delay = CONFIG["resource_delay"]
        if delay > 0:
            time.sleep(delay)
        with LOCK:
            active = is_active(token)
            STATS["resource_ok" if active else "resource_unauthorized"] += 1
            if active and STATS["resource_ok"] == CONFIG["revoke_access_after"]:
                REVOKED_ACCESS.update(ACCESS_TOKENS)
                STATS["access_revocations"] += 1
            if not header:
                STATS["resource_no_token"] += 1
            family = ACCESS_TOKENS.get(token)
        if active:
            self.send_json(200, {"ok": True, "family": family})
            return
        data = json.dumps({"error": "invalid_token"}).encode("utf-8")
        with LOCK:
            challenge = CONFIG["resource_challenge"]
        try:
            self.send_response(401)
            self.send_header("WWW-Authenticate", challenge)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def send_raw(self, status, headers, data):
        try:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def scripted_reply(self):
        """Answers a token request as /config scripted it. Returns False when nothing is."""
        json_type = ("Content-Type", "application/json")
        with LOCK:
            if CONFIG["redirect_to"]:
                reply = (307, [("Location", CONFIG["redirect_to"])], b"")
            elif CONFIG["huge_reply"] > 0:
                filler = "x" * max(CONFIG["huge_reply"] - 20, 0)
                reply = (200, [json_type], json.dumps({"access_token": filler}).encode("utf-8"))
            elif CONFIG["fail_count"] > 0:
                CONFIG["fail_count"] -= 1
                headers = [json_type]
                if CONFIG["fail_retry_after"]:
                    headers.append(("Retry-After", CONFIG["fail_retry_after"]))
                reply = (CONFIG["fail_status"], headers, CONFIG["fail_body"].encode("utf-8"))
            else:
                return False
            STATS["scripted_failures"] += 1
        if reply[0] == 0:
            # A dropped connection: no status line at all, the socket just closes.
            self.close_connection = True
            return True
        if reply[0] < 0:
            # A reset connection: no status line, the socket is reset (RST).
            self.reset_connection()
            return True
        self.send_raw(*reply)
        return True

    def revocation(self, record, params):
        """Answers POST /revoke (its client authentication passed)."""
        with LOCK:
            delay, status = CONFIG["revoke_delay"], CONFIG["revoke_status"]
        if delay > 0 and not self.wait_delay(delay):
            self.close_connection = True
            return
        with LOCK:
            record["status"] = status
            if status == 200:
                revoke(params.get("token", ""))
        self.send_raw(status, [], b"")

    def do_POST(self):
        parsed = urllib.parse.urlsplit(self.path)
        reused = self.requests_on_connection > 0
        if parsed.path == "/token":
            with LOCK:
                STATS["token_posts"] += 1
                if reused:
                    STATS["reused_token_posts"] += 1
                reset = reused and CONFIG["reset_reused"] > 0
                if reset:
                    STATS["reused_resets"] += 1
            if reset:
                self.reset_connection()
                return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.read_body(length)
        if body is None:
            if parsed.path == "/token":
                with LOCK:
                    STATS["incomplete_bodies"] += 1
            self.close_connection = True
            return
        if parsed.path not in ("/token", "/revoke"):
            self.send_json(404, {"error": "no route " + parsed.path})
            return
        params = dict(urllib.parse.parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        with LOCK:
            if parsed.path == "/token":
                multi = urllib.parse.parse_qs(body.decode("utf-8"), keep_blank_values=True)
                STATS["token_forms"].append({
                    "grant_type": params.get("grant_type", ""), "scope": params.get("scope"),
                    "audience": params.get("audience"), "resource": multi.get("resource", [])})
            method, refused = client_authentication(self.headers, params)
            challenge = CONFIG["token_challenge"]
            if parsed.path == "/revoke":
                record = {"token": params.get("token", ""),
                          "hint": params.get("token_type_hint", ""), "auth": method,
                          "status": 401 if refused else 0}
                STATS["revocations"].append(record)
        if parsed.path == "/revoke" and not refused:
            self.revocation(record, params)
            return
        if refused:
            data = json.dumps(refused[1]).encode("utf-8")
            self.send_raw(refused[0], [("WWW-Authenticate", challenge),
                                       ("Content-Type", "application/json")], data)
            return
        if self.scripted_reply():
            return
        with LOCK:
            NEXT["request"] += 1
            number = NEXT["request"]
            STATS["in_flight"] += 1
            caller = (self.headers.get("X-Worker-Pid", ""), time.monotonic())
            IN_FLIGHT[number] = caller
            delay = CONFIG["delay"]
            reply_delay = CONFIG["reply_delay"]
        try:
            completed = self.wait_delay(delay) if delay > 0 else True
            with LOCK:
                if completed:
                    status, reply = grant(params, caller)
                    count("answered_by_pid", caller[0] or "0")
                else:
                    STATS["aborted"] += 1
            if completed and reply_delay > 0:
                time.sleep(reply_delay)
        finally:
            with LOCK:
                STATS["in_flight"] -= 1
                IN_FLIGHT.pop(number, None)
        if completed:
            self.send_json(status, reply)
        else:
            self.close_connection = True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


def exit_at_end_of_file(fd):
    """Exits this process once `fd` reads end of file (its writer, a parent, is gone)."""
    try:
        while os.read(fd, 4096):
            pass
    except Exception:
        pass
    os._exit(0)


def serve(server, hard_timeout, watched_fd):
    """Serves `server` until `watched_fd` reads end of file or `hard_timeout` seconds pass."""
    threading.Thread(target=exit_at_end_of_file, args=(watched_fd,), daemon=True).start()
    timer = threading.Timer(hard_timeout, lambda: os._exit(0))
    timer.daemon = True
    timer.start()
    server.serve_forever()


def main():
    server = Server(("127.0.0.1", 0), Handler)
    sys.stdout.write("%d\n" % server.server_address[1])
    sys.stdout.flush()
    serve(server, HARD_TIMEOUT, sys.stdin.fileno())


def zygote():
    """Starts servers on request, each a fork of this process with fresh state.

    Starting python and importing http.server costs about a quarter of a CPU second; a test run
    that started one server per test spent most of its first 15 seconds on that, on two cores.
    A fork costs a millisecond. This process stays single-threaded (fork copies only the calling
    thread) and reads commands from stdin, one per line:

      spawn <hard timeout in seconds>
                 binds a new server on a free port, forks it, and answers "<port> <pid>"
      stop <pid> stops that server, if it is one of ours and still running; no answer

    It prints "ready" first. It exits when stdin closes (the test process is gone) or after
    HARD_TIMEOUT; every server it started exits with it (each watches a pipe only this process
    writes to), or at its own hard timeout.
    """
    death_read, death_write = os.pipe()
    children = set()
    signal.alarm(max(1, int(HARD_TIMEOUT)))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        while children:  # reap the ended ones, so a stopped pid is never one reused elsewhere
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            children.discard(pid)
        words = line.split()
        if len(words) == 2 and words[0] == "spawn":
            server = Server(("127.0.0.1", 0), Handler)
            pid = os.fork()
            if pid == 0:
                os.close(death_write)
                devnull = os.open(os.devnull, os.O_RDWR)
                os.dup2(devnull, 0)
                os.dup2(devnull, 1)
                signal.alarm(0)
                serve(server, float(words[1]), death_read)
                os._exit(0)
            server.server_close()
            children.add(pid)
            sys.stdout.write("%d %d\n" % (server.server_address[1], pid))
            sys.stdout.flush()
        elif len(words) == 2 and words[0] == "stop" and words[1].isdigit():
            if int(words[1]) in children:
                os.kill(int(words[1]), signal.SIGTERM)
    os._exit(0)


if __name__ == "__main__":
    if "--zygote" in sys.argv[1:]:
        zygote()
    else:
        main()
