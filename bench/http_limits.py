#!/usr/bin/env python3
"""HTTP limits under abuse: peak memory while 120 clients send unsigned 25 MiB webhook bodies at
once, and open file descriptors while 2,000 idle connections are held. Starts `fluxplan serve`
(the binary given, default target/debug/fluxplan) on an embedded database in a temporary dir.
Usage: bench/http_limits.py [BINARY]"""
import os, socket, subprocess, sys, tempfile, threading, time

binary = sys.argv[1] if len(sys.argv) > 1 else "target/debug/fluxplan"
data = tempfile.mkdtemp()
env = dict(os.environ, FLUXPLAN_DATA_DIR=data, FLUXPLAN_GITHUB_WEBHOOK_SECRET="s", FLUXPLAN_LOG="error")
bot = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--workers", "0"], env=env,
                       stdout=subprocess.PIPE, text=True)
port = int(bot.stdout.readline().rsplit(":", 1)[1])

def status(field):
    for line in open(f"/proc/{bot.pid}/status"):
        if line.startswith(field):
            return int(line.split()[1])

def unsigned_body(results):
    body = b"x" * (25 * 1024 * 1024)
    s = socket.create_connection(("127.0.0.1", port))
    head = f"POST /webhooks/github HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: {len(body)}\r\n\r\n"
    try:
        s.sendall(head.encode() + body)
        results.append(s.recv(64).split(b" ")[1].decode())
    except OSError as e:
        results.append(type(e).__name__)
    s.close()

rss_before = status("VmRSS:")
results = []
threads = [threading.Thread(target=unsigned_body, args=(results,)) for _ in range(120)]
for t in threads: t.start()
for t in threads: t.join()
answers = {a: results.count(a) for a in set(results)}
print(f"120 unsigned 25 MiB bodies at once: peak RSS {status('VmHWM:') // 1024} MiB "
      f"(idle {rss_before // 1024} MiB), answers {answers}")

idle = []
for _ in range(2000):
    try:
        s = socket.create_connection(("127.0.0.1", port)); s.sendall(b"GET /healthz HTTP/1.1\r\nHost:")
        idle.append(s)
    except OSError:
        break
time.sleep(1)  # let the server accept what it will
fds = len(os.listdir(f"/proc/{bot.pid}/fd"))
s = socket.create_connection(("127.0.0.1", port)); s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
for c in idle: c.close()
time.sleep(0.5)
h = socket.create_connection(("127.0.0.1", port)); h.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
print(f"2,000 idle connections: {fds} open file descriptors in the server; /healthz afterwards: {h.recv(64).split(b' ')[1].decode()}")
bot.terminate(); bot.wait()
