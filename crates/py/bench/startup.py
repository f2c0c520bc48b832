"""What a new reader process pays before its first object (scripts/measure-startup): the
import, the first loader (runtime, client, credentials, TLS roots), and the first object of
`--uri` (connection, first allocation). Prints one JSON line of milliseconds."""

import argparse
import json
import os
import time

t_start = time.perf_counter()
p = argparse.ArgumentParser()
p.add_argument("--mode", choices=["compat", "s3dlio"], required=True)
p.add_argument("--uri", required=True)
p.add_argument("--endpoint", required=True)
p.add_argument("--ca-bundle")
a = p.parse_args()
os.environ["AWS_ENDPOINT_URL_S3"] = os.environ["AWS_ENDPOINT_URL"] = a.endpoint
if a.ca_bundle:
    os.environ["AWS_CA_BUNDLE"] = a.ca_bundle

t0 = time.perf_counter()
if a.mode == "s3dlio":
    import s3dlio
else:
    from sluice.compat import s3dlio
t1 = time.perf_counter()
loader = s3dlio.PyBytesAsyncDataLoader(s3dlio.PyDataset.from_uris([a.uri]), {"prefetch": 1})
it = loader.items()
t2 = time.perf_counter()
first = it.collect_batch(1)
t3 = time.perf_counter()
assert first and len(first[0]) > 0
print(
    json.dumps(
        {
            "import_ms": (t1 - t0) * 1e3,
            "loader_ms": (t2 - t1) * 1e3,
            "first_object_ms": (t3 - t2) * 1e3,
            "bytes": len(first[0]),
        }
    )
)
