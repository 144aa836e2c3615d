"""A webhook receiver written with the Standard Webhooks reference library (DST-31a tests).

Usage: verify_receiver.py SECRET. Listens on 127.0.0.1 on a free port and prints the port on
the first line. Every POST is checked with `standardwebhooks.Webhook(SECRET).verify`: 204 and
one line `verified <webhook-id> <body>` on stdout when it passes, else 401 with the library's
error text. Runs until stdin closes (the test ends it by dropping the pipe).
"""

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

webhook = Webhook(sys.argv[1])


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            webhook.verify(body, headers)
        except WebhookVerificationError as error:
            text = str(error).encode()
            self.send_response(401)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            return
        print(f"verified {headers['webhook-id']} {body.decode()}", flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:  # keep stdout for the verified lines
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
server.shutdown()
