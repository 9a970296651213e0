"""Arm 7, the consumer a Python user would write in twenty lines.

confluent-kafka batches of 50,000 (consume(num_messages=50000)) -> orjson.loads each
value -> pyarrow Table built column by column (pa.Table.from_pydict; nested attrs stay a
struct, as pyarrow infers them) -> lance.write_dataset(mode='append') -> commit after
each append. With `--reader pyarrow-json`, the batch's values joined by newlines go to
pyarrow's JSON reader instead (multi-threaded C++, no Python object per record).
Prints the same JSON lines as the Node arms (bench/lib/arm-protocol.ts), with the
process's own CPU (time.process_time: every thread) at its first record and last row.
"""

import io
import json
import sys
import time

import lance
import orjson
import pyarrow as pa
import pyarrow.json as pa_json
from confluent_kafka import Consumer

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
records = int(args["--records"])
uri = args["--lance"]
reader = args.get("--reader", "orjson")


def emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def table_of(batch):
    if reader == "pyarrow-json":
        table = pa_json.read_json(io.BytesIO(b"\n".join(m.value() for m in batch)))
    else:
        parsed = [orjson.loads(m.value()) for m in batch]
        table = pa.Table.from_pydict({k: [r.get(k) for r in parsed] for k in parsed[0]})
    return table.append_column("partition", pa.array([m.partition() for m in batch], pa.int32())).append_column(
        "offset", pa.array([m.offset() for m in batch], pa.int64())
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
    messages = consumer.consume(num_messages=50_000, timeout=1.0)
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
