/** `--name value` pairs from the command line of a bench script. */
export function benchArgs(argv: readonly string[] = process.argv.slice(2)): Map<string, string> {
  const args = new Map<string, string>();
  for (let i = 0; i + 1 < argv.length; i += 2) args.set(argv[i]!.replace(/^--/, ''), argv[i + 1]!);
  return args;
}
