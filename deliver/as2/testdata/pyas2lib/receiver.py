"""An AS2 receiver built on pyas2lib, for floodgate's interoperability tests.

Run by deliver/as2/pyas2lib_test.go with Debian's /usr/bin/python3 and
PYTHONPATH naming the folder that holds the pyas2lib package (never part of
this repository). argv[1] is a JSON file naming PEM files:

  {"key": our key and certificate, "peer_cert": the sender's certificate,
   "ca": the CA that issued it}

It serves HTTP (a thread per connection) on 127.0.0.1 (a free port), prints {"port": N} as the first
line on stdout, then one JSON line per request it parsed:

  {"message_id", "status", "error", "signed", "encrypted", "compressed",
   "digest_alg", "enc_alg", "key_alg" (both read with asn1crypto), "mic",
   "payload" (base64), "mdn_signed", "mdn_url" (asynchronous MDNs only)}

and answers each request with pyas2lib's MDN (Mdn().build, run by
Message().parse), signed when asked for, except on the path /unsigned-mdn,
where it has no signing key. A synchronous MDN is the HTTP answer. An
asynchronous one (Receipt-Delivery-Option) is held, the request answered
200 with no body, until the test writes {"post": message_id} on stdin: then
it POSTs the MDN to its URL and prints {"post_status": HTTP status,
"post_body"}. Holding it lets the test decide when the receipt arrives. It
exits when stdin closes.
"""

import base64
import json
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from asn1crypto import cms

import pyas2lib


def load(path):
    with open(path, "rb") as f:
        return f.read()


CFG = json.load(open(sys.argv[1]))
KEY = load(CFG["key"])
PEER_CERT = load(CFG["peer_cert"])
CA = load(CFG["ca"])


def find_org_partner(org_id, partner_id, can_sign=True):
    """Any pair of AS2 names: this receiver is whoever the sender asks for."""
    org = pyas2lib.Organization(
        as2_name=org_id, sign_key=KEY if can_sign else None, decrypt_key=KEY
    )
    partner = pyas2lib.Partner(
        as2_name=partner_id, verify_cert=PEER_CERT, verify_cert_ca=CA
    )
    return org, partner


def cipher_of(body):
    """The content encryption algorithm and the key transport of an
    enveloped-data body, as asn1crypto names them ("aes256_cbc",
    "rsaes_oaep"), or None: pyas2lib reports neither for AES."""
    try:
        content = cms.ContentInfo.load(body)["content"]
        info = content["encrypted_content_info"]
        rcpt = content["recipient_infos"][0].parse()
        return (
            info["content_encryption_algorithm"]["algorithm"].native,
            rcpt["key_encryption_algorithm"]["algorithm"].native,
        )
    except Exception:  # not enveloped data
        return None, None


HELD = {}  # message_id -> asynchronous MDN waiting for {"post": message_id}
HELD_LOCK = threading.Lock()


def post_mdn(message_id):
    """POSTs the held asynchronous MDN of message_id to its URL."""
    with HELD_LOCK:
        mdn = HELD.pop(message_id)
    content = mdn.content
    if isinstance(content, str):
        content = content.encode("utf-8")
    req = urllib.request.Request(
        mdn.mdn_url, data=content, headers=mdn.headers, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return {"post_status": resp.status, "post_body": resp.read().decode()}
    except urllib.error.HTTPError as e:
        return {"post_status": e.code, "post_body": e.read().decode()}


EMIT_LOCK = threading.Lock()


def emit(obj):
    with EMIT_LOCK:  # request threads and the main thread write lines
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep stderr for real errors
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        head = "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
        raw = head.encode("utf-8") + b"\r\n" + body
        msg = pyas2lib.Message()
        can_sign = self.path != "/unsigned-mdn"
        status, (exc, _), mdn = msg.parse(
            raw, find_org_partner_cb=lambda o, p: find_org_partner(o, p, can_sign)
        )
        if mdn is not None and mdn.mdn_mode == "ASYNC":
            with HELD_LOCK:  # before the test can read about it
                HELD[msg.message_id] = mdn
        enc_alg, key_alg = cipher_of(body) if msg.encrypted else (None, None)
        payload = msg.content if exc is None else b""
        if isinstance(payload, str):
            payload = payload.encode("utf-8")
        emit(
            {
                "message_id": msg.message_id,
                "status": status,
                "error": None if exc is None else repr(exc),
                "signed": msg.signed,
                "encrypted": msg.encrypted,
                "compressed": msg.compressed,
                "digest_alg": msg.digest_alg,
                "enc_alg": enc_alg,
                "key_alg": key_alg,
                "mic": msg.mic.decode() if msg.mic else None,
                "payload": base64.b64encode(payload or b"").decode(),
                "mdn_signed": bool(
                    mdn and mdn.payload.get_content_type() == "multipart/signed"
                ),
                "mdn_url": mdn.mdn_url if mdn and mdn.mdn_mode == "ASYNC" else None,
            }
        )
        if mdn is None or mdn.mdn_mode == "ASYNC":
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        content = mdn.content
        self.send_response(200)
        for k, v in mdn.headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    emit({"port": server.server_address[1]})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for line in sys.stdin:  # the test closes stdin to stop us
        if line.strip():
            try:
                emit(post_mdn(json.loads(line)["post"]))
            except Exception as e:  # report it to the test, keep serving
                emit({"post_status": 0, "post_body": repr(e)})
    server.shutdown()


if __name__ == "__main__":
    main()
