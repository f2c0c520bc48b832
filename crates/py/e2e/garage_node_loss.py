"""Rank sharding end to end against Garage, with a node lost mid-epoch.

    scripts/test-garage runs it (after `scripts/garage start`; needs torch):
    python crates/py/e2e/garage_node_loss.py [--ranks 4] [--workers 2] [--objects 160]

WORLD_SIZE processes (RANK 0..n-1), each a torch DataLoader with worker processes over
`sluice.torch.S3IterableDataset`, read one epoch of a dataset from the 3-node Garage cluster
through all three endpoints (S3_ENDPOINT_URIS). Once a quarter of the objects have arrived,
Garage node 2 is killed (SIGKILL). Checked: every object is delivered exactly once across
all ranks and workers, every byte is right (verified in the workers), and the endpoint
counters show the failover (attempts that failed on the killed node; bytes from the
others). Printed: the longest gap between deliveries after the kill (the stall a job sees)
and the counters. Exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
KILLED = 2  # the node killed: its S3 port is the second endpoint


def rank_main(out: Path, uris: list[str], workers: int) -> None:
    """One rank: a DataLoader over this rank's shard; one JSON line per delivered object."""
    import sluice
    import torch.utils.data
    from sluice.testing import pattern
    from sluice.torch import S3IterableDataset

    def check(obj: sluice.Object):
        key = obj.uri.split("/", 3)[3]
        return {"uri": obj.uri, "ok": bytes(memoryview(obj)) == pattern(key, len(obj))}

    class Reporting(S3IterableDataset):
        """Each worker ends its share with its client's per-endpoint counters."""

        def __iter__(self):
            yield from super().__iter__()
            yield {"endpoints": sluice.endpoint_stats(), "worker": self.shard().worker_id}

    ds = Reporting.from_uris(uris, transform=check, prefetch=4)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)
    with out.open("w") as f:
        for item in loader:
            item["t"] = time.time()
            f.write(json.dumps(item) + "\n")
            f.flush()


def lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines() if l.endswith("}")]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--objects", type=int, default=160)
    p.add_argument("--size", type=int, default=2 << 20)
    p.add_argument(
        "--no-kill", action="store_true", help="the same epoch with every node up (a baseline)"
    )
    p.add_argument("--rank-of", help=argparse.SUPPRESS)  # internal: run one rank
    args = p.parse_args()
    bucket = os.environ["SLUICE_GARAGE_BUCKET"]
    prefix = f"e2e-node-loss/{os.getpid()}-{time.time_ns()}/"
    uris = [f"s3://{bucket}/{prefix}{i:05d}.bin" for i in range(args.objects)]

    if args.rank_of:
        out, listed = args.rank_of.split(",", 1)
        rank_main(Path(out), json.loads(Path(listed).read_text()), args.workers)
        return 0

    import sluice
    from sluice.testing import pattern

    # The cluster's credentials, for this process and the ranks (scripts/garage's env).
    os.environ.update(
        AWS_ACCESS_KEY_ID=os.environ["SLUICE_GARAGE_ACCESS_KEY_ID"],
        AWS_SECRET_ACCESS_KEY=os.environ["SLUICE_GARAGE_SECRET_ACCESS_KEY"],
        AWS_REGION=os.environ["SLUICE_GARAGE_REGION"],
    )
    endpoints = os.environ["SLUICE_GARAGE_ENDPOINTS"].split(",")
    # A directory of this run's own: the kill is timed by counting its ranks' lines.
    work = Path(os.environ["SLUICE_GARAGE_DIR"]) / f"e2e-{os.getpid()}-{time.time_ns()}"
    work.mkdir(parents=True)
    writer = sluice.Client(endpoint=endpoints[0])
    t0 = time.time()
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda u: writer.put(u, pattern(u.split("/", 3)[3], args.size)), uris))
    print(f"seeded {len(uris)} × {args.size} B in {time.time() - t0:.1f} s", flush=True)
    listed = work / "uris.json"
    listed.write_text(json.dumps(uris))

    env = dict(os.environ, S3_ENDPOINT_URIS=",".join(endpoints), WORLD_SIZE=str(args.ranks))
    env.pop("AWS_ENDPOINT_URL", None)
    outs = [work / f"rank{r}.jsonl" for r in range(args.ranks)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--workers",
                str(args.workers),
                "--rank-of",
                f"{outs[r]},{listed}",
            ],
            env=dict(env, RANK=str(r)),
        )
        for r in range(args.ranks)
    ]
    killed_at = None
    deadline = time.time() + 300
    while any(pr.poll() is None for pr in procs) and time.time() < deadline:
        done = sum(1 for o in outs for l in lines(o) if "uri" in l)
        if killed_at is None and not args.no_kill and done >= len(uris) // 4:
            subprocess.run([str(ROOT / "scripts/garage"), "kill", str(KILLED)], check=True)
            killed_at = time.time()
            print(f"killed Garage node {KILLED} after {done} of {len(uris)} objects", flush=True)
        time.sleep(0.02)
    for pr in procs:
        if pr.poll() is None:
            pr.kill()
    if killed_at is not None:
        subprocess.run([str(ROOT / "scripts/garage"), "revive", str(KILLED)], check=True)

    failures = []
    if killed_at is None and not args.no_kill:
        failures.append("the epoch ended before a quarter of it arrived: no node was killed")
    if any(pr.returncode != 0 for pr in procs):
        failures.append(f"rank exit codes {[pr.returncode for pr in procs]}")
    items = [l for o in outs for l in lines(o)]
    got = [l["uri"] for l in items if "uri" in l]
    if sorted(got) != sorted(uris):
        missing = set(uris) - set(got)
        dup = len(got) - len(set(got))
        failures.append(f"{len(missing)} objects missing, {dup} delivered twice")
    bad = [l["uri"] for l in items if "uri" in l and not l["ok"]]
    if bad:
        failures.append(f"{len(bad)} objects with wrong bytes: {bad[:3]}")

    reports = [l["endpoints"] for l in items if "endpoints" in l]
    if len(reports) != args.ranks * args.workers:
        failures.append(f"{len(reports)} worker reports, want {args.ranks * args.workers}")
    per = {}
    for report in reports:
        for e in report:
            t = per.setdefault(
                e["url"].rstrip("/"), {"requests": 0, "failures": 0, "bytes_read": 0}
            )
            for k in t:
                t[k] += e[k]
    killed_url = endpoints[KILLED - 1]
    if not args.no_kill and per.get(killed_url, {}).get("failures", 0) == 0:
        failures.append(f"no failed attempt counted on the killed node {killed_url}: {per}")
    total = sum(e["bytes_read"] for e in per.values())
    if total < len(uris) * args.size:
        failures.append(
            f"endpoints read {total} bytes, fewer than the dataset's {len(uris) * args.size}"
        )

    times = sorted(l["t"] for l in items if "uri" in l)
    after = [t for t in times if killed_at and t >= killed_at]
    if killed_at and not (times and times[0] < killed_at and after):
        failures.append("the node was not killed mid-epoch (no delivery before or after the kill)")
    gaps = [b - a for a, b in zip([killed_at] + after, after)] if after else []
    first = min(times) if times else t0
    print(
        json.dumps(
            {
                "objects": len(got),
                "bytes": len(got) * args.size,
                "epoch_s": round(max(times) - first, 2) if times else None,
                "killed_after_s": round(killed_at - first, 2) if killed_at else None,
                "longest_gap_after_kill_s": round(max(gaps), 3) if gaps else None,
                "endpoints": per,
            },
            indent=1,
        )
    )
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    if not failures:
        print(
            f"ok: {len(got)} objects exactly once across {args.ranks} ranks × {args.workers} workers, bytes verified, failover counted"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
