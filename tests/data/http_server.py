"""A quiet static HTTP server for the data fetch tests.

Usage: http_server.py DIR PORT_FILE
Serves DIR on 127.0.0.1 at a free port and writes the port number to PORT_FILE (atomically)
once it is listening. Runs until killed.
"""
import http.server
import os
import sys


def main():
    directory, port_file = sys.argv[1], sys.argv[2]

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=directory, **kwargs)

        def log_message(self, format, *args):  # noqa: A002 - keep the test output clean
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
