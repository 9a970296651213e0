import { execFile, spawnSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { tempDir } from './rows';

const KAFKA_LOCAL_DIR = path.resolve(__dirname, '../../deploy/kafka-local');
const SCRIPT = path.join(KAFKA_LOCAL_DIR, 'kafka-local');
const run = promisify(execFile);

/**
 * A Kafka cluster of several brokers, as production runs (the shared test broker is one
 * node): node 1 is broker and controller on `port` (its controller on port + 1), nodes
 * 2… are brokers only on port + 2, port + 3 …, joined to node 1's controller
 * (deploy/kafka-local, KAFKA_LOCAL_QUORUM). Started and stopped by the suite itself, in a
 * temporary home beside the shared jars, so each run is a fresh cluster.
 */
export class KafkaCluster {
  readonly ports: readonly number[];
  readonly #home: string;
  readonly #replication: number;
  /** What a broker-only node joins with (node 1's controller and cluster id). */
  #joining: NodeJS.ProcessEnv = {};
  #unregister: () => void = () => undefined;

  private constructor(ports: number[], home: string, replication: number) {
    this.ports = ports;
    this.#home = home;
    this.#replication = replication;
  }

  /** Bootstrap addresses of every broker. */
  get brokers(): string[] {
    return this.ports.map((p) => `127.0.0.1:${p}`);
  }

  /** `replication`: of new topics and of the group's offsets (KAFKA_LOCAL_REPLICATION). */
  static async start(port: number, nodes: number, replication = 1): Promise<KafkaCluster> {
    const dir = await tempDir('kl-kafka-cluster');
    const home = path.join(dir, 'home');
    await fsp.mkdir(home);
    const cache = process.env.KAFKA_LOCAL_HOME ?? path.join(KAFKA_LOCAL_DIR, '.cache');
    for (const name of await fsp.readdir(cache)) {
      if (name.startsWith('lib-')) await fsp.symlink(path.join(cache, name), path.join(home, name));
    }
    const ports = [port, ...Array.from({ length: nodes - 1 }, (_, i) => port + 2 + i)];
    const cluster = new KafkaCluster(ports, home, replication);
    // The brokers outlive their starter (setsid): stopped even if the test process exits early.
    const stopAtExit = () => {
      for (const p of ports) spawnSync(SCRIPT, ['stop'], { env: cluster.#env(p), timeout: 60_000 });
    };
    process.once('exit', stopAtExit);
    cluster.#unregister = () => process.removeListener('exit', stopAtExit);
    await run(SCRIPT, ['start'], { env: cluster.#env(port) });
    const { stdout } = await run(SCRIPT, ['cluster-id'], { env: cluster.#env(port) });
    cluster.#joining = {
      KAFKA_LOCAL_QUORUM: `1@127.0.0.1:${port + 1}`,
      KAFKA_LOCAL_CLUSTER_ID: stdout.trim(),
      // Brokers only: a smaller heap than the controller's node.
      KAFKA_HEAP_OPTS: '-Xms128m -Xmx256m -XX:MaxMetaspaceSize=128m -XX:MaxDirectMemorySize=128m',
    };
    await Promise.all(ports.slice(1).map((p) => cluster.restart(p)));
    return cluster;
  }

  /** Starts a broker-only node (again, after crash(): on its own data). */
  async restart(port: number): Promise<void> {
    const node = this.ports.indexOf(port) + 1;
    if (node < 2) throw new Error(`port ${port} is not a broker-only node of ${this.ports.join(',')}`);
    await run(SCRIPT, ['start'], {
      env: { ...this.#env(port), ...this.#joining, KAFKA_LOCAL_NODE_ID: String(node) },
    });
  }

  /** SIGKILLs a broker's JVM, as a machine lost: no controlled shutdown, its partitions' leaders move. */
  async crash(port: number): Promise<void> {
    const pidFile = path.join(this.#home, `broker-${port}`, 'kafka.pid');
    const pid = Number((await fsp.readFile(pidFile, 'utf8')).trim());
    process.kill(pid, 'SIGKILL');
    for (let i = 0; i < 100; i++) {
      // Gone, or a zombie nothing reaped yet (its stat's state is Z): dead either way.
      const stat = await fsp.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
      if (stat === undefined || stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`broker ${port} (pid ${pid}) did not die after SIGKILL`);
  }

  #env(port: number): NodeJS.ProcessEnv {
    return {
      ...process.env,
      KAFKA_LOCAL_PORT: String(port),
      KAFKA_LOCAL_HOME: this.#home,
      KAFKA_LOCAL_REPLICATION: String(this.#replication),
    };
  }

  /** Stops every broker (the controller's node last) and removes the cluster's data. */
  async close(): Promise<void> {
    const stop = (p: number) => run(SCRIPT, ['stop'], { env: this.#env(p) }).catch(() => undefined);
    await Promise.all(this.ports.slice(1).map(stop));
    await stop(this.ports[0]!);
    this.#unregister();
    await fsp.rm(path.dirname(this.#home), { recursive: true, force: true });
  }
}
