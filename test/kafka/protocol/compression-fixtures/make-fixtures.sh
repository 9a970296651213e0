#!/usr/bin/env bash
# Makes the compressed fixtures of test/kafka/protocol/compression.test.ts with the reference
# encoders: the Java producer's (Kafka 3.9.1 jars from deploy/kafka-local's cache) and
# the lz4 and zstd command-line tools (Debian's lz4 and zstd packages). The outputs are
# committed; run again only to change them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lib="$here/../../../deploy/kafka-local/.cache/lib-3.9.1"
cd "$here"
# ~190 KiB of log-like JSON lines: larger than a 64 KiB LZ4 block, several snappy chunks.
python3 - <<'PY'
import json
levels = ["info", "warn", "error", "debug"]
with open("plain.log", "w") as f:
    for i in range(1500):
        f.write(json.dumps({"ts": 1733400000000 + i * 37, "level": levels[i % 4], "service": "checkout-%d" % (i % 7),
                            "msg": "request %d handled in %d ms" % (i, (i * 7919) % 1000), "trace": "%032x" % (i * 2654435761)}) + "\n")
PY
java -cp "$lib/*" MakeFixtures.java "$here"
# LZ4 frames: 4 MiB blocks with a content checksum (the CLI's default), and without.
lz4 -q -f -B7 plain.log lz4-4mib-content-checksum.bin
lz4 -q -f -B4 --no-frame-crc plain.log lz4-64kib-no-checksum.bin
lz4 -q -f -B7 -BD --content-size plain.log lz4-4mib-linked-content-size.bin
# zstd: two frames back to back (halves of the input), and one without a content size.
head -c 100000 plain.log | zstd -q -f -o zstd-frame-1.tmp
tail -c +100001 plain.log | zstd -q -f -o zstd-frame-2.tmp
cat zstd-frame-1.tmp zstd-frame-2.tmp > zstd-two-frames.bin
rm zstd-frame-1.tmp zstd-frame-2.tmp
zstd -q -f --no-content-size plain.log -o zstd-no-content-size.bin
ls -l
