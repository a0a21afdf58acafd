/**
 * `jcp console`: the read-only audit console in the browser (docs/console.md, console/).
 */
import path from 'node:path';
import { JetStreamBus } from '../channel/index.ts';
import { channelNames } from '../channel/index.ts';
import { NatsUnavailable, natsHostPort } from '../channel/index.ts';
import type { ContentId } from '../core/index.ts';
import { ConsoleData, type ConsoleSources } from '../console/index.ts';
import { serveConsole } from '../console/index.ts';
import { TlogStream } from '../node/index.ts';
import { type Command, UsageError, parse, untilSignal } from './command.ts';

const help = `Usage: jcp console [--listen host:port] [--data dir …] [--nats url] [--subject-root R]
                   [--channel grant[=window_uj] …]

Serves the read-only audit console (a web page) and prints its URL; runs until Ctrl-C.
  --listen host:port   where to serve (default 127.0.0.1:0: loopback, any free port)
  --data dir           a (stopped) node's data folder; repeat for several nodes. Shows decisions
                       allowed and refused by deny reason, per-worker attribution (the figures of
                       'jcp receipts attribute'), budgets and spend, the grant tree (root →
                       delegations, shards, channel points: spent and left per grant), and the
                       log's tree
  --nats url           the transparency-log stream: each node's latest checkpoint, its
                       cosignatures, any log-inconsistent alarm (docs/tlog.md); the statement
                       stream: every budget channel's ledger (the figures of 'jcp channel
                       audit'); the shard assignments (which shard is whose, in the grant tree)
  --subject-root R     the cluster's subject root (default jcp)
  --channel g[=w]      a channel grant to audit even before a receipt names it (grants the
                       receipts name are found on the stream by themselves), and its per-point
                       window in µJ (as 'jcp cluster up --channel'), for the overdraft bound;
                       repeat for several
The receipt inspector decodes a pasted receipt (hex), verifies it and proves its inclusion in
its node's log. The console has no write action (GET and HEAD only).`;

/**
 * Serves the console over `dirs` and, with `nats`, the streams under subject root `root`
 * (checkpoints, channel statements, shard assignments), on `host:port` (port 0: any free one).
 * Used by `jcp console` and `jcp demo` (which prints its URL). `close` stops the server and the
 * NATS connection.
 * @throws NatsUnavailable when `nats` does not answer with JetStream within 5 s; Error when the address cannot be bound.
 */
export async function openConsole(o: {
  readonly dirs: readonly string[];
  readonly nats?: string;
  readonly root: string;
  readonly channels?: ConsoleSources['channels'];
  readonly host?: string;
  readonly port?: number;
}): Promise<{ readonly url: string; close(): Promise<void> }> {
  let bus: JetStreamBus | undefined;
  let stream: TlogStream | undefined;
  let sources: ConsoleSources = {};
  if (o.nats !== undefined) {
    bus = JetStreamBus.start(o.nats, { names: channelNames(o.root), name: 'jcp-console' });
    try {
      await bus.ready(5_000);
    } catch (e) {
      await bus.close();
      throw new NatsUnavailable(`cannot reach NATS with JetStream at ${o.nats}: ${(e as Error).message}`, { cause: e });
    }
    stream = new TlogStream(bus.connection!, { root: o.root });
    sources = { statements: bus, shards: { nc: bus.connection!, root: o.root }, channels: o.channels ?? [] };
  }
  try {
    const c = await serveConsole(new ConsoleData(o.dirs, stream, sources), o.host ?? '127.0.0.1', o.port ?? 0);
    return {
      url: c.url,
      close: async () => {
        await c.close();
        await bus?.close();
      },
    };
  } catch (e) {
    await bus?.close();
    throw e;
  }
}

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
      channel: { type: 'string', multiple: true },
    });
    if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
    const listen = values.listen ?? '127.0.0.1:0';
    const m = /^(.+):(\d{1,5})$/.exec(listen);
    if (m === null || Number(m[2]) > 65535) throw new UsageError(`--listen: expected host:port, got ${listen}`);
    const dirs = (values.data ?? []).map((d) => path.resolve(d));
    if (dirs.length === 0 && values.nats === undefined) throw new UsageError('give at least one --data dir or --nats url');
    const channels = (values.channel ?? []).map((c) => {
      const cm = /^([0-9a-f]{64})(?:=(\d{1,20}))?$/.exec(c);
      if (cm === null || (cm[2] !== undefined && BigInt(cm[2]) >= 1n << 64n))
        throw new UsageError(`--channel: expected <grant id (64 lowercase hex)>[=<window µJ>], got ${c}`);
      return { grant_id: cm[1] as ContentId, ...(cm[2] !== undefined ? { window_uj: BigInt(cm[2]) } : {}) };
    });
    if (channels.length > 0 && values.nats === undefined) throw new UsageError('--channel needs --nats (the statement stream)');
    if (values.nats !== undefined) {
      const bad = values.nats.split(',').find((u) => natsHostPort(u.trim()) === undefined);
      if (bad !== undefined) throw new UsageError(`--nats: expected nats://host:port, got ${bad}`);
    }
    const c = await openConsole({
      dirs,
      ...(values.nats !== undefined ? { nats: values.nats } : {}),
      root: values['subject-root'] ?? 'jcp',
      channels,
      host: m[1]!.replace(/^\[|\]$/g, ''),
      port: Number(m[2]),
    });
    const signalled = untilSignal();
    process.stdout.write(`jcp console: ${c.url}\n`);
    await signalled;
    await c.close();
    signalled.off();
    return 0;
  },
};
