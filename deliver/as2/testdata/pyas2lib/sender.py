"""An AS2 sender built on pyas2lib, for floodgate's interoperability tests.

Run by deliver/as2/pyas2lib_test.go with Debian's /usr/bin/python3 and
PYTHONPATH naming the folder that holds the pyas2lib package (never part of
this repository). argv[1] is a JSON file naming PEM files:

  {"key": our key and certificate, "peer_cert": the receiver's certificate,
   "ca": the CA that issued it}

It reads one JSON request per line on stdin:

  {"url", "from", "to", "sign", "digest_alg", "encrypt", "enc_alg",
   "key_enc_alg" ("rsaes_pkcs1v15" or "rsaes_oaep"), "compress",
   "mdn_mode" ("SYNC", "ASYNC" or null), "mdn_url" (with "ASYNC"),
   "mdn_digest_alg" (null: an unsigned MDN), "content_type", "payload"
   (base64), "sign_key" (optional: another PEM file with a key and
   certificate to sign with)}

builds the message with pyas2lib (Message().build), posts it, parses the
answer with Mdn().parse, and writes one JSON line per request:

  {"message_id", "mic", "http_status", "mdn_status", "mdn_detail",
   "mdn_signed", "mdn_mic" (Received-Content-MIC as read), "error"}

An asynchronous MDN reaches the test, not this helper; the test hands it
over as {"mdn": {"message_id" (of the message it answers), "headers"
(HTTP headers), "body" (base64)}}, and the helper parses it with
Mdn().parse against the message it built and writes the same line, from
"mdn_status" on.

It exits at the end of stdin.
"""

import base64
import functools
import json
import sys
import traceback
import urllib.error
import urllib.request
from email import message_from_bytes

import pyas2lib
import pyas2lib.as2
import pyas2lib.cms


def load(path):
    with open(path, "rb") as f:
        return f.read()


CFG = json.load(open(sys.argv[1]))
KEY = load(CFG["key"])
PEER_CERT = load(CFG["peer_cert"])
CA = load(CFG["ca"])


def received_mic(raw):
    """Received-Content-MIC of an MDN (signed or not), or None."""
    for part in message_from_bytes(raw).walk():
        if part.get_content_type() == "message/disposition-notification":
            for report in part.get_payload():
                for k, v in report.items():
                    if k.lower() == "received-content-mic":
                        return v.strip()
    return None


SENT = {}  # message_id -> Message, for asynchronous MDNs


def read_mdn(msg, raw, content_type):
    """Parses an MDN for msg with pyas2lib (signature and MIC checked)."""
    out = {"mdn_signed": content_type.split(";")[0].strip().lower() == "multipart/signed"}
    out["mdn_mic"] = received_mic(raw)
    mdn = pyas2lib.Mdn()
    out["mdn_status"], out["mdn_detail"] = mdn.parse(raw, lambda mid, rcpt: msg)
    return out


def async_mdn(req):
    msg = SENT.pop(req["message_id"])
    headers, body = req["headers"], base64.b64decode(req["body"])
    raw = "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode() + b"\r\n" + body
    ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    return read_mdn(msg, raw, ctype)


def send(req):
    key = load(req["sign_key"]) if req.get("sign_key") else KEY
    org = pyas2lib.Organization(
        as2_name=req["from"], sign_key=key, mdn_url=req.get("mdn_url")
    )
    partner = pyas2lib.Partner(
        as2_name=req["to"],
        verify_cert=PEER_CERT,
        verify_cert_ca=CA,
        encrypt_cert=PEER_CERT,
        encrypt_cert_ca=CA,
        sign=req.get("sign", False),
        digest_alg=req.get("digest_alg") or "sha256",
        encrypt=req.get("encrypt", False),
        enc_alg=req.get("enc_alg") or "aes_256_cbc",
        compress=req.get("compress", False),
        mdn_mode=req.get("mdn_mode"),
        mdn_digest_alg=req.get("mdn_digest_alg"),
        key_enc_alg=req.get("key_enc_alg") or "rsaes_pkcs1v15",
    )
    # pyas2lib 1.4.4's Message().build does not pass Partner.key_enc_alg to
    # cms.encrypt_message, so it always encrypts the key with PKCS#1 v1.5:
    # hand it over here, to pyas2lib's own encrypt_message.
    pyas2lib.as2.encrypt_message = functools.partial(
        pyas2lib.cms.encrypt_message, key_enc_alg=partner.key_enc_alg
    )
    msg = pyas2lib.Message(org, partner)
    msg.build(
        base64.b64decode(req["payload"]),
        content_type=req.get("content_type") or "application/EDI-X12",
        subject="pyas2lib interop",
    )
    out = {"message_id": msg.message_id, "mic": msg.mic.decode() if msg.mic else None}
    http_req = urllib.request.Request(
        req["url"], data=msg.content, headers=msg.headers, method="POST"
    )
    try:
        with urllib.request.urlopen(http_req, timeout=30) as resp:
            status, headers, body = resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        status, headers, body = e.code, e.headers, e.read()
    out["http_status"] = status
    if partner.mdn_mode == "ASYNC":
        SENT[msg.message_id] = msg
    if not body:
        return out
    raw = "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode() + b"\r\n" + body
    out.update(read_mdn(msg, raw, headers.get("Content-Type", "")))
    return out


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            out = async_mdn(req["mdn"]) if "mdn" in req else send(req)
        except Exception:  # report it to the test, keep serving
            out = {"error": traceback.format_exc()}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
