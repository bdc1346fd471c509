"""An AS2 receiver built on pyas2lib, for floodgate's interoperability tests.

Run by deliver/as2/pyas2lib_test.go with Debian's /usr/bin/python3 and
PYTHONPATH naming the folder that holds the pyas2lib package (never part of
this repository). argv[1] is a JSON file naming PEM files:

  {"key": our key and certificate, "peer_cert": the sender's certificate,
   "ca": the CA that issued it}

It serves HTTP (a thread per connection) on 127.0.0.1 (a free port), prints {"port": N} as the first
line on stdout, then one JSON line per request it parsed:

  {"message_id", "status", "error", "signed", "encrypted", "compressed",
   "digest_alg", "enc_alg" (read with asn1crypto), "mic", "payload" (base64),
   "mdn_signed"}

and answers each request with pyas2lib's synchronous MDN (Mdn().build, run
by Message().parse), signed when asked for, except on the path
/unsigned-mdn, where it has no signing key. It exits when stdin closes.
"""

import base64
import json
import sys
import threading
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
    """The content encryption algorithm of an enveloped-data body, as
    asn1crypto names it ("aes256_cbc"), or None: pyas2lib does not report
    it for AES."""
    try:
        info = cms.ContentInfo.load(body)["content"]["encrypted_content_info"]
        return info["content_encryption_algorithm"]["algorithm"].native
    except Exception:  # not enveloped data
        return None


def emit(obj):
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
                "enc_alg": cipher_of(body) if msg.encrypted else None,
                "mic": msg.mic.decode() if msg.mic else None,
                "payload": base64.b64encode(payload or b"").decode(),
                "mdn_signed": bool(
                    mdn and mdn.payload.get_content_type() == "multipart/signed"
                ),
            }
        )
        if mdn is None:
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
    sys.stdin.read()  # the test closes stdin to stop us
    server.shutdown()


if __name__ == "__main__":
    main()
