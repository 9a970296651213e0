import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.kafka.common.compress.Lz4BlockOutputStream;
import org.xerial.snappy.Snappy;
import org.xerial.snappy.SnappyOutputStream;
import com.github.luben.zstd.ZstdOutputStreamNoFinalizer;

/**
 * Compressed fixtures made by the encoders the Java producer uses (kafka-clients 3.9.1,
 * snappy-java, zstd-jni): run by make-fixtures.sh with the Kafka jars on the class path.
 */
public class MakeFixtures {
  public static void main(String[] args) throws Exception {
    Path dir = Path.of(args[0]);
    byte[] plain = Files.readAllBytes(dir.resolve("plain.log"));
    // Raw snappy block (what librdkafka and kafkajs write).
    Files.write(dir.resolve("snappy-raw.bin"), Snappy.compress(plain));
    // xerial framing, the Java producer's; 32 KiB chunks so the stream holds several.
    ByteArrayOutputStream xerial = new ByteArrayOutputStream();
    try (OutputStream out = new SnappyOutputStream(xerial, 32 * 1024)) { out.write(plain); }
    Files.write(dir.resolve("snappy-xerial.bin"), xerial.toByteArray());
    // Kafka's own LZ4 frame writer, as its producer calls it (64 KiB blocks, no checksums).
    ByteArrayOutputStream lz4 = new ByteArrayOutputStream();
    try (OutputStream out = new Lz4BlockOutputStream(lz4, Lz4BlockOutputStream.BLOCKSIZE_64KB, 9, false, false)) {
      out.write(plain);
    }
    Files.write(dir.resolve("lz4-java.bin"), lz4.toByteArray());
    // zstd-jni's stream, as the Java producer writes it: no content size in the frame header.
    ByteArrayOutputStream zstd = new ByteArrayOutputStream();
    try (OutputStream out = new ZstdOutputStreamNoFinalizer(zstd, 3)) { out.write(plain); }
    Files.write(dir.resolve("zstd-java.bin"), zstd.toByteArray());
  }
}
