"""The vector peer: the embeddings consumer a Python user would write in twenty lines.

Records {"id": n, "embedding": ...} with a 768-dimension float32 vector as base64 of
its little-endian bytes or as a JSON array of numbers. confluent-kafka batches of
`--batch` (consume(num_messages=...)) -> orjson.loads each value -> numpy: base64
decoded into one bytes buffer read as float32 (np.frombuffer), or the arrays into one
float32 matrix (np.array(..., dtype=float32)) -> a pyarrow FixedSizeList column over
that buffer (no copy) -> lance.write_dataset(mode='append') -> synchronous commit after
each append. Prints bench/lib/arm-protocol.ts's JSON lines, with the process's own CPU
(time.process_time: every thread) at its first record and last row.
"""

import binascii
import json
import sys
import time

import lance
import numpy as np
import orjson
import pyarrow as pa
from confluent_kafka import Consumer

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
records = int(args["--records"])
uri = args["--lance"]
dim = int(args.get("--dim", "768"))
batch_size = int(args.get("--batch", "10000"))


def emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def table_of(batch):
    parsed = [orjson.loads(m.value()) for m in batch]
    first = parsed[0]["embedding"]
    if isinstance(first, str):
        flat = np.frombuffer(b"".join(binascii.a2b_base64(r["embedding"]) for r in parsed), dtype="<f4")
    else:
        flat = np.array([r["embedding"] for r in parsed], dtype=np.float32).reshape(-1)
    if flat.size != dim * len(parsed):
        raise ValueError(f"a vector is not {dim} float32 long")
    return pa.table(
        {
            "id": pa.array([r["id"] for r in parsed], pa.int64()),
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(flat), dim),
            "partition": pa.array([m.partition() for m in batch], pa.int32()),
            "offset": pa.array([m.offset() for m in batch], pa.int64()),
        }
    )


consumer = Consumer(
    {
        "bootstrap.servers": args["--brokers"],
        "group.id": args["--group"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
)
started = False


def on_assign(c, partitions):
    global started
    if not started:
        started = True
        emit(event="start")


consumer.subscribe([args["--topic"]], on_assign=on_assign)
rows = 0
nbytes = 0
appends = 0
first_cpu = None
last = time.monotonic()
while rows < records:
    before = time.process_time()
    messages = consumer.consume(num_messages=batch_size, timeout=1.0)
    batch = [m for m in messages if m.error() is None]
    if not batch:
        continue
    if first_cpu is None:
        first_cpu = before
        emit(event="first", cpuSeconds=before)
    nbytes += sum(len(m.value()) for m in batch)
    lance.write_dataset(table_of(batch), uri, mode="append")
    appends += 1
    consumer.commit(asynchronous=False)
    rows += len(batch)
    if time.monotonic() - last > 0.25:
        emit(event="progress", rows=rows, bytes=nbytes)
        last = time.monotonic()

cpu = time.process_time()
emit(event="progress", rows=rows, bytes=nbytes)
verified = lance.dataset(uri).count_rows()
emit(event="done", rows=rows, bytes=nbytes, verifiedRows=verified, cpuSeconds=cpu, detail={"appends": appends})
consumer.close()
