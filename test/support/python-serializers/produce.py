"""Produces values with Confluent's Python serializers, as a Python user's producer does.

Reads one JSON request on stdin:
  brokers, registry, topic: where to produce, and the registry's Confluent API base
  format: "protobuf" | "avro" | "json"
  conf: the serializer's configuration (empty: its defaults, auto-registration)
  protobuf: files {name: .proto text}; the message classes are made by protoc
    (grpcio-tools), as a user's build makes them; values are {message: full name, value:
    the binary encoding in base64}, parsed into that class and serialized by a
    ProtobufSerializer of that class
  avro, json: schema (the schema text); values are JSON, {"$bytes": base64} for bytes
Prints one JSON line: the ids the serializer framed the values with, and the count.
"""

import base64
import faulthandler
import importlib
import json
import os
import struct
import sys
import tempfile

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext


def plain(value):
    """JSON values with {"$bytes": base64} for bytes, as Python values."""
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return base64.b64decode(value["$bytes"])
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def protobuf_serializer(request, registry):
    from google.protobuf import descriptor_pool
    from google.protobuf.message_factory import GetMessageClass
    from grpc_tools import protoc
    import grpc_tools
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    out = tempfile.mkdtemp(prefix="python-serializers-")
    for name, text in request["files"].items():
        path = os.path.join(out, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    args = ["protoc", f"-I{out}", f"-I{well_known}", f"--python_out={out}", *request["files"]]
    if protoc.main(args) != 0:
        raise SystemExit(f"protoc failed on {list(request['files'])}")
    sys.path.insert(0, out)
    for name in request["files"]:
        importlib.import_module(name[: -len(".proto")].replace("/", ".") + "_pb2")
    serializers = {}

    def serialize(value, context):
        name = value["message"]
        if name not in serializers:
            message_class = GetMessageClass(descriptor_pool.Default().FindMessageTypeByName(name))
            serializer = ProtobufSerializer(message_class, registry, request.get("conf") or None)
            serializers[name] = (message_class, serializer)
        message_class, serializer = serializers[name]
        return serializer(message_class.FromString(base64.b64decode(value["value"])), context)

    return serialize, lambda v: v


def avro_serializer(request, registry):
    from confluent_kafka.schema_registry.avro import AvroSerializer

    return AvroSerializer(registry, request["schema"], conf=request.get("conf") or None), plain


def json_serializer(request, registry):
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    return JSONSerializer(request["schema"], registry, conf=request.get("conf") or None), plain


def main():
    # The test kills this process after 120 s: before that, every thread's stack goes to
    # stderr, which the test prints, so a hang names where it waits.
    faulthandler.dump_traceback_later(100, exit=False)
    request = json.load(sys.stdin)
    # The client's default is no timeout at all: a request the registry never answers
    # would hang here until the kill, saying nothing.
    registry = SchemaRegistryClient({"url": request["registry"], "timeout": 30})
    make = {"protobuf": protobuf_serializer, "avro": avro_serializer, "json": json_serializer}[request["format"]]
    serializer, value_of = make(request, registry)
    context = SerializationContext(request["topic"], MessageField.VALUE)
    producer = Producer({"bootstrap.servers": request["brokers"], "acks": "all", "enable.idempotence": True})
    failures = []
    ids = set()

    def delivered(error, _message):
        if error is not None:
            failures.append(str(error))

    for value in request["values"]:
        framed = serializer(value_of(value), context)
        ids.add(struct.unpack(">bI", framed[:5])[1])
        producer.produce(request["topic"], value=framed, partition=0, on_delivery=delivered)
        producer.poll(0)
    left = producer.flush(60)
    if left or failures:
        raise SystemExit(f"{left} values undelivered, failures: {failures[:3]}")
    print(json.dumps({"produced": len(request["values"]), "schemaIds": sorted(ids)}))


if __name__ == "__main__":
    main()
