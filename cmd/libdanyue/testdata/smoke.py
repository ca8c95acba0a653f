"""Drives libdanyue as a Flutter, .NET or Electron app would, through its C ABI.

usage: python3 smoke.py LIBDANYUE DATADIR

Starts a node with its HTTP API on 127.0.0.1:0 (libp2p on loopback, no mDNS), reads /v1/status with the
bearer token, sets a reading position, checks the error paths, stops the
node, and prints one "key: value" line per result for the Go test to check.
"""

import ctypes
import json
import sys
import urllib.error
import urllib.request

KEY = "md5:900150983cd24fb0d6963f7d28e17f72"


def main():
    lib = ctypes.CDLL(sys.argv[1])
    data_dir = sys.argv[2]
    lib.danyue_start.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.danyue_start.restype = ctypes.c_int
    lib.danyue_start_opts.argtypes = [ctypes.c_char_p] * 5 + [ctypes.c_int]
    lib.danyue_start_opts.restype = ctypes.c_int
    lib.danyue_stop.argtypes = [ctypes.c_int]
    lib.danyue_stop.restype = ctypes.c_int
    # c_void_p, not c_char_p: the pointer must come back to danyue_free.
    for f in (lib.danyue_api_address, lib.danyue_api_token):
        f.argtypes = [ctypes.c_int]
        f.restype = ctypes.c_void_p
    lib.danyue_last_error.argtypes = []
    lib.danyue_last_error.restype = ctypes.c_void_p
    lib.danyue_free.argtypes = [ctypes.c_void_p]
    lib.danyue_free.restype = None
    lib.danyue_set_memory_limit.argtypes = [ctypes.c_longlong]
    lib.danyue_set_memory_limit.restype = ctypes.c_longlong

    def take(ptr):
        if not ptr:
            return None
        s = ctypes.string_at(ptr).decode()
        lib.danyue_free(ptr)
        return s

    # Bad input first: a clear error, no node.
    print("bad start:", lib.danyue_start(None, None, None), take(lib.danyue_last_error()))
    bad = lib.danyue_start_opts(data_dir.encode(), None, None, b"not-a-multiaddr", None, 1)
    print("bad listen:", bad, "multiaddr" in take(lib.danyue_last_error()))
    print("unknown handle:", take(lib.danyue_api_address(99)), take(lib.danyue_last_error()))

    # The app's memory policy: set, read back, unchanged by 0.
    lib.danyue_set_memory_limit(64 << 20)
    print("memory limit:", lib.danyue_set_memory_limit(0), lib.danyue_set_memory_limit(-1))

    # Loopback only and no LAN discovery: a test talks to nothing else.
    h = lib.danyue_start_opts(data_dir.encode(), b"smoke", b"127.0.0.1:0", b"/ip4/127.0.0.1/tcp/0", None, 1)
    if h < 0:
        print("start failed:", take(lib.danyue_last_error()))
        return 1
    print("handle:", h)
    addr = take(lib.danyue_api_address(h))
    token = take(lib.danyue_api_token(h))
    print("address:", addr)
    print("token length:", len(token))

    def call(method, path, body=None, auth=True):
        req = urllib.request.Request("http://" + addr + path, method=method)
        if auth:
            req.add_header("Authorization", "Bearer " + token)
        if body is not None:
            req.add_header("Content-Type", "application/json")
            req.data = json.dumps(body).encode()
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)

    status, st = call("GET", "/v1/status")
    print("status:", status, "device name:", st["device"]["name"], "books:", st["counts"]["books"])
    status, _ = call("GET", "/v1/status", auth=False)
    print("without token:", status)
    status, b = call("PUT", "/v1/books/" + KEY + "/position", {"char": 1234, "percent": 0.25, "title": "Smoke"})
    print("position:", status, b["key"], b["position"]["char"], b["title"])
    status, err = call("PUT", "/v1/books/md5:nothex/position", {"char": 1, "percent": 0.1})
    print("bad key:", status, err["error"])
    status, st = call("GET", "/v1/status")
    print("books after:", st["counts"]["books"])

    print("stop:", lib.danyue_stop(h))
    print("stop again:", lib.danyue_stop(h), take(lib.danyue_last_error()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
