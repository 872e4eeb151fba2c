#!/usr/bin/env python3
"""A local stand-in for the Hugging Face hub, for `harness/tests/pull.rs`.

Serves the files under ROOT/<owner>/<repo>/ at /<owner>/<repo>/resolve/<revision>/<path> with the
response headers the `hf-hub` crate's sync client needs: `etag` (the file's sha256),
`x-repo-commit` (a fixed 40-hex commit per repo), and for range requests `206` with
`content-range: bytes A-B/SIZE`. Missing files get 404 with `x-error-code: EntryNotFound`.
Every request is appended to LOG as one line "METHOD PATH RANGE" so the test can count them.

Usage: hf_standin.py --root ROOT --log LOG   (prints "PORT <n>" once it listens on 127.0.0.1)
"""

import argparse
import hashlib
import http.server
import os
import re
import sys
import threading

ARGS = None
LOG_LOCK = threading.Lock()
RESOLVE = re.compile(r"^/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$")


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):  # keep the test output quiet
        pass

    def record(self):
        with LOG_LOCK, open(ARGS.log, "a") as f:
            f.write(f"{self.command} {self.path} {self.headers.get('Range', '-')}\n")

    def not_found(self, body_too):
        body = b'{"error":"Entry not found"}'
        self.send_response(404)
        self.send_header("x-error-code", "EntryNotFound")
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if body_too:
            self.wfile.write(body)

    def serve(self, body_too):
        self.record()
        m = RESOLVE.match(self.path.split("?", 1)[0])
        if not m:
            return self.not_found(body_too)
        owner, repo, _revision, rel = m.groups()
        parts = [owner, repo] + rel.split("/")
        if any(p in ("", ".", "..") for p in parts):
            return self.not_found(body_too)
        path = os.path.join(ARGS.root, *parts)
        if not os.path.isfile(path):
            return self.not_found(body_too)
        with open(path, "rb") as f:
            data = f.read()
        size = len(data)
        commit = hashlib.sha1(f"{owner}/{repo}".encode()).hexdigest()
        etag = hashlib.sha256(data).hexdigest()
        start, end, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        if rng:
            rm = re.match(r"^bytes=(\d+)-(\d*)$", rng.strip())
            if not rm or int(rm.group(1)) >= size:
                self.send_response(416)
                self.send_header("content-range", f"bytes */{size}")
                self.send_header("content-length", "0")
                self.end_headers()
                return
            start = int(rm.group(1))
            if rm.group(2):
                end = min(int(rm.group(2)), size - 1)
            status = 206
        chunk = data[start : end + 1]
        self.send_response(status)
        self.send_header("etag", f'"{etag}"')
        self.send_header("x-repo-commit", commit)
        self.send_header("accept-ranges", "bytes")
        if status == 206:
            self.send_header("content-range", f"bytes {start}-{end}/{size}")
        self.send_header("content-type", "application/octet-stream")
        self.send_header("content-length", str(len(chunk)))
        self.end_headers()
        if body_too:
            self.wfile.write(chunk)

    def do_GET(self):
        self.serve(True)

    def do_HEAD(self):
        self.serve(False)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--log", required=True)
    ARGS = p.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
