/** `jcp demo` (`npm start`): the main job — a local enforcement cluster on real MCP servers, end to end (demo/). */
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { asCoded, renderReport, runDemo } from '../demo/index.ts';
import { exitAfterInterrupt, interrupting, loopbackNatsUrlProblem } from '../testkit/index.ts';
import { type Command, UsageError, parse } from './command.ts';
import type { openConsole } from './console.ts';

const help = `Usage: jcp demo [--json out.json] [--dir d] [--nats url | --no-nats] [--pace ms] [--keep-console]

Runs the main job on this machine, in about a minute, and reports from the signed receipts:

  1. an issuer mints a files root grant, split into one shard per node (§4.5), and a memory root
     grant every node serves as one budget channel (§4.5 profile, over NATS);
  2. three enforcement nodes start ('jcp node start'), each in front of the real MCP servers
     @modelcontextprotocol/server-filesystem (over a sample folder made here) and
     @modelcontextprotocol/server-memory;
  3. three agent workers (separate processes) get depth-0 grants and read and search files and
     write and read memory through the nodes until their budgets run out;
  4. mid-run the issuer revokes one worker (§4.3) and checkpoints and amends another to a tighter
     budget (§4.7);
  5. a 2-of-3 team made by FROST DKG over NATS approves one irreversible action (memory
     delete_entities: the filesystem server has no delete tool); one member alone is refused.

Progress goes to stdout line by line. The report gives per-worker attribution from verified
receipts, denies by reason, the channel's overdraft against its bound, the energy provenance and
why, and where the receipts are with the commands to inspect them.

NATS: the server on 127.0.0.1:4222 if it answers, else a nats-server started here on a free
loopback port; with none installed the demo runs the parts that need no NATS and says how to
install it.

Options:
  --json file   also write the report as JSON (µJ as decimal strings)
  --dir d       put the demo's files (sample folder, node data and receipt logs, team keystores)
                in d, which must be empty or absent (default: a new folder under the temp dir)
  --nats url    use this NATS (loopback; must answer with JetStream)
  --no-nats     run without NATS (no budget channel, no threshold team)
  --pace ms     pause between a worker's rounds (default 150)
  --keep-console
                keep the audit console (below) running after the report, until Ctrl-C

The audit console ('jcp console', docs/console.md) is served on loopback as soon as the nodes
are up: the demo prints 'jcp console: http://127.0.0.1:PORT/'. While the nodes run their folders
are locked (shown as [log-locked]) and the stream views are live; once they stop, the receipts'
views fill in. It stops when the report is printed, unless --keep-console. A NATS the demo
started itself is stopped at the end, so afterwards the stream views show that error.

Every process the demo starts is stopped at the end, on failure and on Ctrl-C; the folder stays
(it holds the evidence). Exit status 0 only if every receipt verifies and every step worked.
A demo that cannot run prints one line 'jcp demo: error [code]: …' and exits 1: nats-unavailable
(the --nats url is no NATS with JetStream; checked before anything is made), dir-not-empty,
demo-failed (anything else), or the code of the underlying fault; 2 for a usage mistake.`;

/** The `jcp demo` command. */
export const command: Command = {
  name: 'demo',
  summary: 'the main job: a local cluster on real MCP servers, with a report from verified receipts',
  help,
  async run(argv) {
    const { values } = parse(
      argv,
      {
        json: { type: 'string' },
        dir: { type: 'string' },
        nats: { type: 'string' },
        'no-nats': { type: 'boolean' },
        pace: { type: 'string' },
        'keep-console': { type: 'boolean' },
      },
      false,
    );
    if (values.nats !== undefined && values['no-nats']) throw new UsageError('--nats and --no-nats exclude each other');
    const badNats = values.nats === undefined ? undefined : loopbackNatsUrlProblem(values.nats, false);
    if (badNats !== undefined) throw new UsageError(`--nats: ${badNats}`);
    const pace = values.pace === undefined ? undefined : Number(values.pace);
    if (pace !== undefined && (!Number.isInteger(pace) || pace < 0 || pace > 10_000))
      throw new UsageError('--pace: milliseconds, 0..10000');
    const print = (line: string) => process.stdout.write(`${line}\n`);
    // On SIGINT/SIGTERM every child testkit/procs.ts tracks is SIGKILLed, the demo's streams and
    // buckets on a user's NATS are removed (registered with whenInterrupted), then it exits 130.
    const onSignal = () => {
      process.stderr.write('\njcp demo: interrupted; stopping every process it started\n');
      exitAfterInterrupt(130);
    };
    // Every child (nodes, FROST participants) inherits this and exits if the demo is SIGKILLed.
    process.env['JCP_EXIT_WITH_PARENT'] = '1';
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    let auditConsole: Awaited<ReturnType<typeof openConsole>> | undefined;
    try {
      const report = await runDemo({
        print,
        onNodesStarted: async (info) => {
          // Loaded once the nodes are up: the demo starts them before it loads what comes after.
          const { openConsole } = await import('./console.ts');
          auditConsole = await openConsole({
            dirs: info.dataDirs,
            ...(info.natsUrl !== undefined ? { nats: info.natsUrl } : {}),
            root: info.subjectRoot,
            channels: info.channels,
          });
          print(
            `jcp console: ${auditConsole.url} (the audit console, read-only; until the report is printed${values['keep-console'] ? ' and after it' : ''})`,
          );
        },
        ...(values.dir !== undefined ? { dir: values.dir } : {}),
        ...(values.nats !== undefined ? { nats: values.nats } : {}),
        ...(values['no-nats'] ? { noNats: true } : {}),
        ...(pace !== undefined ? { paceMs: pace } : {}),
      });
      for (const line of renderReport(report)) print(line);
      if (values.json !== undefined) {
        writeFileSync(resolve(values.json), `${JSON.stringify(report, null, 2)}\n`);
        print(`report written to ${resolve(values.json)}`);
      }
      if (values['keep-console'] && auditConsole !== undefined) {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
        print(`jcp console: still serving ${auditConsole.url} (--keep-console); Ctrl-C to stop`);
        await new Promise<void>((r) => {
          process.once('SIGINT', r);
          process.once('SIGTERM', r);
        });
      }
      return report.exit_code;
    } catch (e) {
      // Interrupted: the run failed because its processes were killed; the interrupted exit (130)
      // comes within its bound, and an error line now would only mislead.
      if (interrupting()) await new Promise(() => undefined);
      // Every failure has a stable code (its own, or demo-failed); cli/main.ts prints it as
      // `jcp demo: error [code]: message` and exits 1.
      const err = asCoded(e);
      if (values.json !== undefined) {
        const failed = { format: 'jcp-demo-report/1', ok: false, exit_code: 1, code: err.code, error: err.message };
        writeFileSync(resolve(values.json), `${JSON.stringify(failed, null, 2)}\n`);
      }
      throw err;
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      await auditConsole?.close().catch(() => undefined);
    }
  },
};
