"""One Python instance of the mixed-language fleet test (tests/fleet_mixed.py).

A `harness.Client` built from the bootstrap config in argv[1] (it follows the `config_source`).
On `go` (a line on stdin) it sends GETs to service `api` from FLEET_THREADS threads, paced to
FLEET_RATE requests per second in all; on `stop` it finishes. Every 20 ms it prints its state
as one JSON line: the version it runs, the requests that succeeded and failed, the first errors.
"""

import json
import os
import sys
import threading
import time

import harness


def main() -> None:
    config = json.loads(sys.argv[1])
    threads = int(os.environ.get("FLEET_THREADS", "2"))
    rate = float(os.environ.get("FLEET_RATE", "400"))
    client = harness.Client(config)
    lock = threading.Lock()
    counts = {"ok": 0, "failed": 0}
    errors: list = []
    go, stop = threading.Event(), threading.Event()

    def load() -> None:
        go.wait()
        per_thread = rate / threads
        start, n = time.monotonic(), 0
        while not stop.is_set():
            n += 1
            delay = start + n / per_thread - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            error = None
            try:
                status = client.get("api", "/ok").status
                if status != 200:
                    error = f"status {status}"
            except harness.HarnessError as e:
                error = f"{type(e).__name__}: {e}"
            with lock:
                if error is None:
                    counts["ok"] += 1
                else:
                    counts["failed"] += 1
                    if len(errors) < 5:
                        errors.append(error)

    def commands() -> None:
        for line in sys.stdin:
            if line.strip() == "go":
                go.set()
            elif line.strip() == "stop":
                break
        go.set()
        stop.set()

    workers = [threading.Thread(target=load, daemon=True) for _ in range(threads)]
    for w in workers:
        w.start()
    threading.Thread(target=commands, daemon=True).start()

    def report(done: bool) -> None:
        s = client.config_source_state()
        with lock:
            line = {"version": s["version"], "rejected": s["rejected_version"], "connected": s["connected"], "ok": counts["ok"], "failed": counts["failed"], "errors": list(errors), "done": done}
        print(json.dumps(line), flush=True)

    while not stop.is_set():
        report(False)
        time.sleep(0.02)
    for w in workers:
        w.join()
    report(True)
    client.close()


if __name__ == "__main__":
    main()
