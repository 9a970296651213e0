import { execFile, spawnSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { tempDir } from './rows';

const KAFKA_LOCAL_DIR = path.resolve(__dirname, '../../deploy/kafka-local');
const run = promisify(execFile);

/**
 * A TCP proxy in front of one broker listener: `cut()` resets every connection
 * through it and refuses new ones (accepted, then reset at once) until `restore()`.
 */
export class TcpProxy {
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  #down = false;
  /** Connections reset by cut() or refused while down. */
  severed = 0;

  private constructor(server: net.Server) {
    this.#server = server;
  }

  static async start(targetPort: number): Promise<TcpProxy> {
    const server = net.createServer();
    const proxy = new TcpProxy(server);
    server.on('connection', (client) => proxy.#accept(client, targetPort));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get port(): number {
    return (this.#server.address() as net.AddressInfo).port;
  }

  #accept(client: net.Socket, targetPort: number): void {
    if (this.#down) {
      this.severed += 1;
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      this.#sockets.add(s);
      s.on('close', () => {
        this.#sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
      s.on('error', () => undefined);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }

  cut(): void {
    this.#down = true;
    for (const s of this.#sockets) {
      this.severed += 1;
      s.resetAndDestroy();
    }
  }

  restore(): void {
    this.#down = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/**
 * A second single-node broker, started and stopped by the test itself (the shared
 * test broker is never restarted), through a copy of deploy/kafka-local whose
 * server.properties adds one listener per proxy: the listener's advertised address
 * is its proxy, so a client bootstrapped through a proxy reaches the broker only
 * through it (metadata included). The PLAINTEXT listener on `port` is direct, for
 * the test's own admin and producers.
 */
export class FaultBroker {
  readonly port: number;
  readonly proxies: readonly TcpProxy[];
  readonly #script: string;
  readonly #home: string;

  private constructor(port: number, proxies: TcpProxy[], script: string, home: string) {
    this.port = port;
    this.proxies = proxies;
    this.#script = script;
    this.#home = home;
  }

  /** Direct address (the test's clients). */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** The broker's log directory (one folder per partition, `<topic>-<partition>`). */
  get logDir(): string {
    return path.join(this.#home, `broker-${this.port}`, 'data');
  }

  /** The address a replica bootstraps through to use proxy `i`. */
  proxied(i: number): string {
    return `127.0.0.1:${this.proxies[i]!.port}`;
  }

  static async start(port: number, proxies: number): Promise<FaultBroker> {
    const dir = await tempDir('kl-fault-broker');
    const home = path.join(dir, 'home');
    const scripts = path.join(dir, 'kafka-local');
    await fsp.mkdir(home);
    await fsp.mkdir(scripts);
    // The jars are shared with the test broker's cache; data is the test's own.
    const cache = process.env.KAFKA_LOCAL_HOME ?? path.join(KAFKA_LOCAL_DIR, '.cache');
    for (const name of await fsp.readdir(cache)) {
      if (name.startsWith('lib-')) await fsp.symlink(path.join(cache, name), path.join(home, name));
    }
    // Every file of the script's folder (it sources its helpers beside it), not its cache.
    for (const entry of await fsp.readdir(KAFKA_LOCAL_DIR, { withFileTypes: true })) {
      if (entry.isFile())
        await fsp.copyFile(path.join(KAFKA_LOCAL_DIR, entry.name), path.join(scripts, entry.name));
    }
    await fsp.chmod(path.join(scripts, 'kafka-local'), 0o755);
    // The script sources the servers' shared lifecycle from ../lib.
    await fsp.symlink(path.resolve(KAFKA_LOCAL_DIR, '../lib'), path.join(dir, 'lib'));
    const made: TcpProxy[] = [];
    for (let i = 0; i < proxies; i++) made.push(await TcpProxy.start(port + 2 + i));
    const names = made.map((_, i) => `R${i}`);
    const listeners = made.map((_, i) => `${names[i]}://127.0.0.1:${port + 2 + i}`);
    const advertised = made.map((p, i) => `${names[i]}://127.0.0.1:${p.port}`);
    const template = (await fsp.readFile(path.join(KAFKA_LOCAL_DIR, 'server.properties'), 'utf8'))
      .split('\n')
      .map((line) => {
        if (line.startsWith('listeners=')) return [line, ...listeners].join(',');
        if (line.startsWith('advertised.listeners=')) return [line, ...advertised].join(',');
        if (line.startsWith('listener.security.protocol.map='))
          return [line, ...names.map((n) => `${n}:PLAINTEXT`)].join(',');
        return line;
      })
      .join('\n');
    await fsp.writeFile(path.join(scripts, 'server.properties'), template);
    const broker = new FaultBroker(port, made, path.join(scripts, 'kafka-local'), home);
    // The broker outlives its starter (setsid): stop it even if the test process exits early.
    const stopAtExit = () => {
      spawnSync(path.join(scripts, 'kafka-local'), ['stop'], { env: broker.#env(), timeout: 60_000 });
    };
    process.once('exit', stopAtExit);
    broker.#unregister = () => process.removeListener('exit', stopAtExit);
    await broker.start();
    return broker;
  }

  #unregister: () => void = () => undefined;

  #env(): NodeJS.ProcessEnv {
    return { ...process.env, KAFKA_LOCAL_PORT: String(this.port), KAFKA_LOCAL_HOME: this.#home };
  }

  async #run(command: 'start' | 'stop'): Promise<string> {
    const { stdout, stderr } = await run(this.#script, [command], { env: this.#env() });
    return `${stdout}${stderr}`.trim();
  }

  start(): Promise<string> {
    return this.#run('start');
  }

  stop(): Promise<string> {
    return this.#run('stop');
  }

  /** Stops the broker and the proxies and removes its data. */
  async close(): Promise<void> {
    await this.stop().catch(() => undefined);
    this.#unregister();
    await Promise.all(this.proxies.map((p) => p.close()));
    await fsp.rm(path.dirname(this.#home), { recursive: true, force: true });
  }
}
