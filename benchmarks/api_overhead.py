"""The API's own overhead: `POST /api/query` latency seen by a client on loopback, minus the
engine's time that the server reports in its `Server-Timing: engine;dur=…` header.

What remains is HTTP parsing, key authentication, taking a pooled connection, JSON encoding and
the socket. Run against a server you started (`tortus-pg serve`) with a key of the tenant that
holds the questions' corpus (`tortus-pg key create default`):

    python benchmarks/api_overhead.py --url http://127.0.0.1:8000 --key tpg_… \
        --questions tortus_pg/demo/golden.jsonl --clients 1 4 --rounds 3

Prints p50/p95 of the overhead and of the whole request, and the requests answered per second,
per number of concurrent clients. Comparing pool sizes (`TORTUS_API_POOL_SIZE`) is a matter of
restarting the server with each and running this again.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter

import httpx
import numpy as np

_ENGINE = re.compile(r"engine;dur=([\d.]+)")


@dataclass(frozen=True)
class Sample:
    total_ms: float
    engine_ms: float

    @property
    def overhead_ms(self) -> float:
        return self.total_ms - self.engine_ms


def questions_of(path: Path) -> list[str]:
    """The `question` of each JSON line (a golden set or a multi-hop set's questions.jsonl)."""
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return [row["question"] for row in rows]


def ask(http: httpx.Client, question: str) -> Sample:
    began = perf_counter()
    response = http.post("/api/query", json={"question": question})
    total = (perf_counter() - began) * 1000
    response.raise_for_status()
    match = _ENGINE.search(response.headers.get("server-timing", ""))
    if match is None:
        raise SystemExit("the server sent no Server-Timing engine duration; is it tortus-pg serve?")
    return Sample(total, float(match.group(1)))


def run(url: str, key: str, questions: list[str], clients: int) -> tuple[list[Sample], float]:
    """Every question asked once per client, `clients` at a time, each on its own connection;
    with the seconds from the first timed request to the last answer."""
    samples: list[Sample] = []
    ready = threading.Barrier(clients + 1)
    lock = threading.Lock()

    def worker(offset: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
            ask(http, questions[0])  # open the connection before timing
            ready.wait()
            for i in range(len(questions)):
                sample = ask(http, questions[(i + offset) % len(questions)])
                with lock:
                    samples.append(sample)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    ready.wait()
    began = perf_counter()
    for thread in threads:
        thread.join()
    return samples, perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--key", required=True, help="an API key with the query scope")
    parser.add_argument("--questions", type=Path, required=True, help="a JSONL file with a 'question' per line")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--rounds", type=int, default=1, help="times each client asks every question")
    args = parser.parse_args()
    questions = questions_of(args.questions) * args.rounds
    print("| clients | requests | overhead p50 ms | overhead p95 ms | request p50 ms | request p95 ms | requests/s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for clients in args.clients:
        samples, seconds = run(args.url, args.key, questions, clients)
        overhead = np.array([s.overhead_ms for s in samples])
        total = np.array([s.total_ms for s in samples])
        print(f"| {clients} | {len(samples)} | {np.percentile(overhead, 50):.2f} | {np.percentile(overhead, 95):.2f} "
              f"| {np.percentile(total, 50):.1f} | {np.percentile(total, 95):.1f} | {len(samples) / seconds:.1f} |")


if __name__ == "__main__":
    main()
