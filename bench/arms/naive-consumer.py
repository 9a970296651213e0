"""Arm 7, the consumer a Python user would write in twenty lines.

confluent-kafka batches of 50,000 (consume(num_messages=50000)) -> orjson.loads each
value -> pyarrow Table -> lance.write_dataset(mode='append') -> commit after each
append. Prints the same JSON lines as the Node arms (bench/lib/arm-protocol.ts).
"""

import json
import sys
import time

import lance
import orjson
import pyarrow as pa
from confluent_kafka import Consumer, TopicPartition

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
records = int(args["--records"])
uri = args["--lance"]


def emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


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
last = time.monotonic()
while rows < records:
    messages = consumer.consume(num_messages=50_000, timeout=1.0)
    batch = [m for m in messages if m.error() is None]
    if not batch:
        continue
    parsed = [orjson.loads(m.value()) for m in batch]
    nbytes += sum(len(m.value()) for m in batch)
    for r, m in zip(parsed, batch):
        r["attrs"] = orjson.dumps(r["attrs"]).decode()
        r["partition"] = m.partition()
        r["offset"] = m.offset()
    table = pa.Table.from_pylist(parsed)
    lance.write_dataset(table, uri, mode="append")
    appends += 1
    consumer.commit(asynchronous=False)
    rows += len(batch)
    if time.monotonic() - last > 0.25:
        emit(event="progress", rows=rows, bytes=nbytes)
        last = time.monotonic()

emit(event="progress", rows=rows, bytes=nbytes)
verified = lance.dataset(uri).count_rows()
emit(event="done", rows=rows, bytes=nbytes, verifiedRows=verified, detail={"appends": appends})
consumer.close()
