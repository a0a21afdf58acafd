/**
 * `jcp console`: the read-only audit console in the browser (docs/console.md, console/).
 */
import path from 'node:path';
import { JetStreamBus } from '../channel/index.ts';
import { channelNames } from '../channel/index.ts';
import { NatsUnavailable, natsHostPort } from '../channel/index.ts';
import { ConsoleData } from '../console/index.ts';
import { serveConsole } from '../console/index.ts';
import { TlogStream } from '../node/index.ts';
import { type Command, UsageError, parse } from './command.ts';

const help = `Usage: jcp console [--listen host:port] [--data dir …] [--nats url] [--subject-root R]

Serves the read-only audit console (a web page) and prints its URL; runs until Ctrl-C.
  --listen host:port   where to serve (default 127.0.0.1:0: loopback, any free port)
  --data dir           a (stopped) node's data folder; repeat for several nodes. Shows decisions
                       allowed and refused by deny reason, per-worker attribution (the figures of
                       'jcp receipts attribute'), budgets and spend, and the log's tree
  --nats url           the transparency-log stream: each node's latest checkpoint, its
                       cosignatures, any log-inconsistent alarm (docs/tlog.md)
  --subject-root R     the cluster's subject root (default jcp)
The receipt inspector decodes a pasted receipt (hex), verifies it and proves its inclusion in
its node's log. The console has no write action (GET and HEAD only).`;

/** The `jcp console` command. */
export const command: Command = {
  name: 'console',
  summary: 'serve the read-only audit console in the browser (decisions, attribution, budgets, checkpoints, receipt inspector)',
  help,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      listen: { type: 'string' },
      data: { type: 'string', multiple: true },
      nats: { type: 'string' },
      'subject-root': { type: 'string' },
    });
    if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
    const listen = values.listen ?? '127.0.0.1:0';
    const m = /^(.+):(\d{1,5})$/.exec(listen);
    if (m === null || Number(m[2]) > 65535) throw new UsageError(`--listen: expected host:port, got ${listen}`);
    const dirs = (values.data ?? []).map((d) => path.resolve(d));
    if (dirs.length === 0 && values.nats === undefined) throw new UsageError('give at least one --data dir or --nats url');
    let bus: JetStreamBus | undefined;
    let stream: TlogStream | undefined;
    if (values.nats !== undefined) {
      const bad = values.nats.split(',').find((u) => natsHostPort(u.trim()) === undefined);
      if (bad !== undefined) throw new UsageError(`--nats: expected nats://host:port, got ${bad}`);
      const root = values['subject-root'] ?? 'jcp';
      bus = JetStreamBus.start(values.nats, { names: channelNames(root), name: 'jcp-console' });
      try {
        await bus.ready(5_000);
      } catch (e) {
        await bus.close();
        throw new NatsUnavailable(`cannot reach NATS with JetStream at ${values.nats}: ${(e as Error).message}`, { cause: e });
      }
      stream = new TlogStream(bus.connection!, { root });
    }
    const c = await serveConsole(new ConsoleData(dirs, stream), m[1]!.replace(/^\[|\]$/g, ''), Number(m[2]));
    process.stdout.write(`jcp console: ${c.url}\n`);
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
    await c.close();
    await bus?.close();
    return 0;
  },
};
